package forrst

import "net/http"

// Code is a Forrst error code, in SCREAMING_SNAKE_CASE. Services may define
// their own; the standard ones are the constants below.
type Code string

// Standard error codes.
const (
	// Codes of the protocol itself.
	CodeParseError             Code = "PARSE_ERROR"              // the body is not valid JSON
	CodeInvalidRequest         Code = "INVALID_REQUEST"          // the document breaks the protocol
	CodeInvalidProtocolVersion Code = "INVALID_PROTOCOL_VERSION" // the protocol version is not supported
	CodeFunctionNotFound       Code = "FUNCTION_NOT_FOUND"       // no such function
	CodeVersionNotFound        Code = "VERSION_NOT_FOUND"        // no such version of the function
	CodeExtensionNotSupported  Code = "EXTENSION_NOT_SUPPORTED"  // the server does not support an extension

	// Codes a function's caller can fix, never retried.
	CodeInvalidArguments       Code = "INVALID_ARGUMENTS"
	CodeValidationError        Code = "VALIDATION_ERROR" // listed by the Forrst retry extension as not retryable
	CodeSchemaValidationFailed Code = "SCHEMA_VALIDATION_FAILED"
	CodeUnauthorized           Code = "UNAUTHORIZED"
	CodeForbidden              Code = "FORBIDDEN"
	CodeNotFound               Code = "NOT_FOUND"
	CodeConflict               Code = "CONFLICT"
	CodeGone                   Code = "GONE"
	CodeCancelled              Code = "CANCELLED"
	CodeIdempotencyConflict    Code = "IDEMPOTENCY_CONFLICT" // a key reused with other arguments

	// Codes that may pass: the retry extension's default table covers them.
	CodeRateLimited           Code = "RATE_LIMITED"
	CodeUnavailable           Code = "UNAVAILABLE"
	CodeDeadlineExceeded      Code = "DEADLINE_EXCEEDED"
	CodeInternalError         Code = "INTERNAL_ERROR"
	CodeDependencyError       Code = "DEPENDENCY_ERROR"
	CodeIdempotencyProcessing Code = "IDEMPOTENCY_PROCESSING" // the same key is still being processed
	CodeServerMaintenance     Code = "SERVER_MAINTENANCE"
	CodeFunctionMaintenance   Code = "FUNCTION_MAINTENANCE"
	CodeFunctionDisabled      Code = "FUNCTION_DISABLED"

	// Codes of the specification's extensions. Of them, only the two lock
	// acquisition codes may pass: the lock was held, so the function did not
	// run.
	CodeExtensionNotApplicable     Code = "EXTENSION_NOT_APPLICABLE"  // the extension does not apply to this function
	CodeLockAcquisitionFailed      Code = "LOCK_ACQUISITION_FAILED"   // atomic-lock: the lock is held, and the call asked not to wait
	CodeLockTimeout                Code = "LOCK_TIMEOUT"              // atomic-lock: the lock stayed held for as long as the call asked to wait
	CodeLockNotFound               Code = "LOCK_NOT_FOUND"            // atomic-lock: no such lock to release
	CodeLockOwnershipMismatch      Code = "LOCK_OWNERSHIP_MISMATCH"   // atomic-lock: the release names another owner
	CodeLockAlreadyReleased        Code = "LOCK_ALREADY_RELEASED"     // atomic-lock: the lock was released before
	CodeAsyncOperationNotFound     Code = "ASYNC_OPERATION_NOT_FOUND" // async: no such operation, or it expired
	CodeAsyncOperationFailed       Code = "ASYNC_OPERATION_FAILED"    // async: the operation failed for good
	CodeAsyncCannotCancel          Code = "ASYNC_CANNOT_CANCEL"       // async: the operation is past cancelling
	CodeAsyncVersionConflict       Code = "ASYNC_VERSION_CONFLICT"    // async: the operation changed concurrently
	CodeAsyncQuotaExceeded         Code = "ASYNC_QUOTA_EXCEEDED"      // async: too many operations at once
	CodeReplayNotFound             Code = "REPLAY_NOT_FOUND"          // replay: no such replay
	CodeReplayExpired              Code = "REPLAY_EXPIRED"            // replay: past its TTL
	CodeReplayAlreadyComplete      Code = "REPLAY_ALREADY_COMPLETE"   // replay: already replayed
	CodeReplayCancelled            Code = "REPLAY_CANCELLED"          // replay: cancelled
	CodeCancellationTokenUnknown   Code = "CANCELLATION_TOKEN_UNKNOWN"
	CodeCancellationTooLate        Code = "CANCELLATION_TOO_LATE" // the call had already finished
	CodeSimulationNotSupported     Code = "SIMULATION_NOT_SUPPORTED"
	CodeSimulationScenarioNotFound Code = "SIMULATION_SCENARIO_NOT_FOUND"
)

// HTTPStatus returns the status a Forrst server answers with when a call
// fails with this code alone: the Forrst specification's mapping, and the
// reference server's for the codes the specification gives none (423 Locked
// for the lock acquisition codes, 409 and 429 for ASYNC_VERSION_CONFLICT and
// ASYNC_QUOTA_EXCEEDED, 504 for DEADLINE_EXCEEDED). Codes it does not know, a
// service's own among them, are the caller's fault: 400.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden, CodeLockOwnershipMismatch:
		return http.StatusForbidden
	case CodeNotFound, CodeFunctionNotFound, CodeVersionNotFound, CodeLockNotFound,
		CodeAsyncOperationNotFound, CodeReplayNotFound, CodeCancellationTokenUnknown,
		CodeSimulationScenarioNotFound:
		return http.StatusNotFound
	case CodeConflict, CodeIdempotencyConflict, CodeIdempotencyProcessing, CodeLockAlreadyReleased,
		CodeAsyncVersionConflict, CodeReplayAlreadyComplete, CodeCancellationTooLate:
		return http.StatusConflict
	case CodeGone, CodeReplayExpired, CodeReplayCancelled:
		return http.StatusGone
	case CodeLockAcquisitionFailed, CodeLockTimeout:
		return http.StatusLocked
	case CodeSchemaValidationFailed:
		return http.StatusUnprocessableEntity
	case CodeRateLimited, CodeAsyncQuotaExceeded:
		return http.StatusTooManyRequests
	case CodeInternalError, CodeAsyncOperationFailed:
		return http.StatusInternalServerError
	case CodeDependencyError:
		return http.StatusBadGateway
	case CodeUnavailable, CodeFunctionDisabled, CodeServerMaintenance, CodeFunctionMaintenance:
		return http.StatusServiceUnavailable
	case CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case CodeCancelled:
		return 499 // client closed request
	}
	return http.StatusBadRequest
}

// DefaultGuidance returns the retry extension's default guidance for a code:
// the table of the Forrst retry extension for the codes it lists; for the two
// lock acquisition codes, which the atomic-lock extension calls retryable
// and the table leaves out, the reference server's fallback (exponential,
// 1 s, 3); and {"allowed": false} for every other code.
//
//	RATE_LIMITED            fixed        60 s  3
//	UNAVAILABLE             exponential   1 s  5
//	DEADLINE_EXCEEDED       immediate     0 s  1
//	INTERNAL_ERROR          exponential   1 s  3
//	DEPENDENCY_ERROR        exponential   2 s  3
//	IDEMPOTENCY_PROCESSING  fixed         1 s  3
//	SERVER_MAINTENANCE      fixed        60 s  1
//	FUNCTION_MAINTENANCE    fixed        60 s  1
//	FUNCTION_DISABLED       fixed        30 s  2
//	LOCK_ACQUISITION_FAILED exponential   1 s  3
//	LOCK_TIMEOUT            exponential   1 s  3
func DefaultGuidance(c Code) RetryData {
	guide := func(s Strategy, seconds int64, attempts int) RetryData {
		d := RetryData{Allowed: true, Strategy: s, MaxAttempts: attempts}
		if s != Immediate {
			d.After = &Duration{Value: seconds, Unit: Second}
		}
		return d
	}
	switch c {
	case CodeRateLimited:
		return guide(Fixed, 60, 3)
	case CodeUnavailable:
		return guide(Exponential, 1, 5)
	case CodeDeadlineExceeded:
		return guide(Immediate, 0, 1)
	case CodeInternalError:
		return guide(Exponential, 1, 3)
	case CodeDependencyError:
		return guide(Exponential, 2, 3)
	case CodeIdempotencyProcessing:
		return guide(Fixed, 1, 3)
	case CodeServerMaintenance, CodeFunctionMaintenance:
		return guide(Fixed, 60, 1)
	case CodeFunctionDisabled:
		return guide(Fixed, 30, 2)
	case CodeLockAcquisitionFailed, CodeLockTimeout:
		return guide(Exponential, 1, 3)
	}
	return RetryData{Allowed: false}
}

// mayHaveRun reports whether a call that failed with c may have had effects
// on the server. Only codes that reject a call before its function runs are
// known to leave nothing behind; for any other, a service's own included,
// the function may have run in part or in full.
func (c Code) mayHaveRun() bool {
	switch c {
	case CodeRateLimited, CodeUnavailable, CodeServerMaintenance, CodeFunctionMaintenance,
		CodeFunctionDisabled, CodeIdempotencyProcessing,
		CodeParseError, CodeInvalidRequest, CodeInvalidProtocolVersion, CodeFunctionNotFound,
		CodeVersionNotFound, CodeExtensionNotSupported, CodeExtensionNotApplicable,
		CodeLockAcquisitionFailed, CodeLockTimeout, CodeAsyncQuotaExceeded:
		return false
	}
	return true
}
