package forrst_test

// Tests that hold the package to the Forrst reference server
// (faustbrian/mesh-spec: the specification and its PHP implementation,
// with its test fixtures).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/retrykit/retry/forrst"
)

// A body that is JSON but not an object is a request that breaks the
// protocol, not one that cannot be parsed: the reference server answers
// `[]` and `[1, 2, 3]` with INVALID_REQUEST (its fixtures
// rpc-call-with-an-empty-array and rpc-call-with-invalid-batch) and keeps
// PARSE_ERROR for malformed JSON (rpc-call-with-invalid-json).
func TestNonObjectRequestIsInvalidRequest(t *testing.T) {
	var s forrst.Server
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil })
	srv := newServer(t, &s)
	for _, body := range []string{`[]`, "[\n    1,\n    2,\n    3\n]", `[` + requestDoc("req_1", "f", "") + `]`, `42`, `-1.5e3`, `"call f"`, `null`, `true`, ` false `} {
		t.Run(body, func(t *testing.T) {
			r := post(t, srv.URL, body)
			checkFailure(t, r, "", 400, "INVALID_REQUEST", "")
			wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
			if !strings.Contains(r.Errors[0].Message, "object") {
				t.Errorf("message %q does not say a request is a JSON object", r.Errors[0].Message)
			}
			_, err := forrst.DecodeRequest(strings.NewReader(body), 0)
			if !errors.Is(err, forrst.ErrInvalid) || errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeRequest: err = %v, want ErrInvalid and not ErrMalformed", err)
			}
			_, err = forrst.DecodeResponse(strings.NewReader(body), 0)
			if !errors.Is(err, forrst.ErrInvalid) || errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeResponse: err = %v, want ErrInvalid and not ErrMalformed", err)
			}
		})
	}
	// Malformed JSON, whatever its first byte, stays PARSE_ERROR.
	for _, body := range []string{`{"jsonrpc": "2.0", "method": "app.foobar, "params": "bar", "baz]`, `[1,`, `[] []`, `42 x`, `nul`, `"open`, ``, `<html>`} {
		t.Run(body, func(t *testing.T) {
			r := post(t, srv.URL, body)
			checkFailure(t, r, "", 400, "PARSE_ERROR", "")
			if _, err := forrst.DecodeRequest(strings.NewReader(body), 0); !errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeRequest: err = %v, want ErrMalformed", err)
			}
		})
	}
}
