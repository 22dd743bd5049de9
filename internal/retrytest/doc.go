// Package retrytest holds what the tests of retrykit's packages share: a
// clock a test moves by hand and loopback HTTP servers. The contract every
// integration must keep is the conformance suite of its subpackage.
//
// It imports the standard library only, so that the root package's own tests
// can use it without an import cycle; a helper that needs gRPC lives in the
// grpcretry module.
package retrytest
