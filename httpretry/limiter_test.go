package httpretry

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// ptHistory builds a failure history from a compact spec: "C" a connect
// error, "R" a read error, a number a failed response with that status.
// Attempts are numbered from 1 in order.
func ptHistory(spec ...string) []Failure {
	fs := make([]Failure, 0, len(spec))
	for i, s := range spec {
		f := Failure{Attempt: i + 1}
		switch s {
		case "C":
			f.Kind, f.Err = KindConnect, errors.New("dial tcp: connection refused")
		case "R":
			f.Kind, f.Err = KindRead, errors.New("read: connection reset by peer")
		default:
			var code int
			if _, err := fmt.Sscan(s, &code); err != nil {
				panic("ptHistory: bad spec " + s)
			}
			f.Kind, f.Response = KindStatus, &http.Response{StatusCode: code, Header: http.Header{}}
		}
		fs = append(fs, f)
	}
	return fs
}

func ptNext(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

type ptLimiterCase struct {
	history string // space-separated ptHistory spec
	want    bool
}

func ptRunLimiterCases(t *testing.T, name string, l Limiter, cases []ptLimiterCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(name+"/"+c.history, func(t *testing.T) {
			if got := l.Allow(ptHistory(strings.Fields(c.history)...), ptNext(t)); got != c.want {
				t.Errorf("%s.Allow(%s) = %v, want %v", name, c.history, got, c.want)
			}
		})
	}
}

func TestFailureStatusCode(t *testing.T) {
	if got := ptHistory("503")[0].StatusCode(); got != 503 {
		t.Errorf("StatusCode() = %d, want 503", got)
	}
	if got := ptHistory("C")[0].StatusCode(); got != 0 {
		t.Errorf("StatusCode() of a transport error = %d, want 0", got)
	}
}

func TestMaxErrors(t *testing.T) {
	tests := []struct {
		name  string
		l     Limiter
		cases []ptLimiterCase
	}{
		{"MaxErrors(3)", MaxErrors(3), []ptLimiterCase{
			{"C", true},
			{"503 R", true},
			{"C R 500", true},
			{"C R 500 502", false},
			{"503 503 503 503 503", false},
		}},
		{"MaxErrors(1)", MaxErrors(1), []ptLimiterCase{
			{"R", true},
			{"R C", false},
		}},
		{"MaxErrors(0)", MaxErrors(0), []ptLimiterCase{
			{"C", false},
			{"R", false},
			{"503", false},
		}},
	}
	for _, tt := range tests {
		ptRunLimiterCases(t, tt.name, tt.l, tt.cases)
	}
}

func TestMaxConnectAndReadErrors(t *testing.T) {
	tests := []struct {
		name  string
		l     Limiter
		cases []ptLimiterCase
	}{
		{"MaxConnectErrors(2)", MaxConnectErrors(2), []ptLimiterCase{
			{"C", true},
			{"C C", true},
			{"C C C", false},
			{"R C R C", true},         // two connect errors
			{"C R C R C", false},      // three, the latest a connect error
			{"C C C R", true},         // latest is a read error: not judged
			{"C C C 503", true},       // latest is a response: not judged
			{"R R R R R R", true},     // no connect errors
			{"503 503 503 C", true},   // one connect error
			{"503 C 503 C 503", true}, // latest is a response
		}},
		{"MaxConnectErrors(0)", MaxConnectErrors(0), []ptLimiterCase{
			{"C", false},
			{"R", true},
			{"503", true},
			{"R R C", false},
		}},
		{"MaxReadErrors(2)", MaxReadErrors(2), []ptLimiterCase{
			{"R", true},
			{"R R", true},
			{"R R R", false},
			{"C R C R", true},
			{"R C R C R", false},
			{"R R R C", true},
			{"R R R 502", true},
			{"C C C C C C", true},
			{"500 500 500 R", true},
		}},
		{"MaxReadErrors(0)", MaxReadErrors(0), []ptLimiterCase{
			{"R", false},
			{"C", true},
			{"500", true},
			{"C C R", false},
		}},
	}
	for _, tt := range tests {
		ptRunLimiterCases(t, tt.name, tt.l, tt.cases)
	}
}

func TestMaxErrorResponses(t *testing.T) {
	tests := []struct {
		name  string
		l     Limiter
		cases []ptLimiterCase
	}{
		{"MaxErrorResponses(2)", MaxErrorResponses(2), []ptLimiterCase{
			{"500", true},
			{"500 503", true},
			{"500 503 502", false},
			{"429 429 429", false},
			{"500 503 502 C", true}, // transport errors are not limited
			{"500 503 502 R", true},
			{"C C C C 500", true}, // one response
			{"C R C R", true},
			{"R 500 C 503 R 504", false},
		}},
		{"MaxErrorResponses(0)", MaxErrorResponses(0), []ptLimiterCase{
			{"503", false},
			{"C", true},
			{"R", true},
		}},
		{"MaxErrorResponses(2, 502, 503)", MaxErrorResponses(2, 502, 503), []ptLimiterCase{
			{"500", false}, // not one of the codes: refused at once
			{"429", false},
			{"504", false},
			{"502", true},
			{"503", true},
			{"503 502", true},
			{"502 503 502", false},
			{"502 503 C", true},
			{"502 503 502 R", true},
			{"C R C R C", true},
			{"502 C 503", true},
			{"502 502 500", false},
		}},
		{"MaxErrorResponses(0, 503)", MaxErrorResponses(0, 503), []ptLimiterCase{
			{"503", false},
			{"C", true},
		}},
	}
	for _, tt := range tests {
		ptRunLimiterCases(t, tt.name, tt.l, tt.cases)
	}
}

func TestMaxErrorResponsesCopiesCodes(t *testing.T) {
	codes := []int{502, 503}
	l := MaxErrorResponses(5, codes...)
	codes[0], codes[1] = 500, 500
	ptRunLimiterCases(t, "MaxErrorResponses(5, 502, 503)", l, []ptLimiterCase{
		{"500", false},
		{"502", true},
		{"503", true},
	})
}

func TestAll(t *testing.T) {
	never := LimiterFunc(func([]Failure, *http.Request) bool { return false })
	always := LimiterFunc(func([]Failure, *http.Request) bool { return true })
	tests := []struct {
		name  string
		l     Limiter
		cases []ptLimiterCase
	}{
		{"All()", All(), []ptLimiterCase{
			{"C", true},
			{"R", true},
			{"500 500 500 500 500 500 500 500 500 500", true},
		}},
		{"All(always)", All(always), []ptLimiterCase{{"C", true}}},
		{"All(never)", All(never), []ptLimiterCase{{"C", false}}},
		{"All(always, never)", All(always, never), []ptLimiterCase{{"C", false}}},
		{"All(never, always)", All(never, always), []ptLimiterCase{{"C", false}}},
		{"All(MaxErrors(1), MaxErrors(3))", All(MaxErrors(1), MaxErrors(3)), []ptLimiterCase{
			{"C", true},
			{"C C", false},
		}},
		// HXEP-0001: at most 3 errors in all, and only 502 and 503 responses,
		// at most 5 of them.
		{"seed composition", All(MaxErrors(3), MaxErrorResponses(5, 502, 503)), []ptLimiterCase{
			{"502", true},
			{"503", true},
			{"500", false},
			{"429", false},
			{"C", true},
			{"R", true},
			{"502 503 502", true},
			{"502 503 502 503", false}, // fourth error
			{"C R C", true},
			{"C R C R", false},
			{"C 503", true},
			{"C 503 500", false},
			{"503 R 502", true},
		}},
		{"All(MaxConnectErrors(1), MaxReadErrors(1))", All(MaxConnectErrors(1), MaxReadErrors(1)), []ptLimiterCase{
			{"C R", true},
			{"C R C", false},
			{"C R R", false},
			{"C R 503 503 503", true},
		}},
	}
	for _, tt := range tests {
		ptRunLimiterCases(t, tt.name, tt.l, tt.cases)
	}
}

func TestAllCopiesLimiters(t *testing.T) {
	ls := []Limiter{MaxErrors(5)}
	l := All(ls...)
	ls[0] = MaxErrors(0)
	ptRunLimiterCases(t, "All(MaxErrors(5))", l, []ptLimiterCase{{"C", true}, {"C C C C C C", false}})
}

func TestAllOrder(t *testing.T) {
	setter := LimiterFunc(func(_ []Failure, next *http.Request) bool {
		next.Header.Set("X-Pt-Retry", "yes")
		return true
	})
	tests := []struct {
		name        string
		setterFirst bool
		wantSeen    string
	}{
		{"setter first", true, "yes"},
		{"setter last", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, called := "", false
			reader := LimiterFunc(func(_ []Failure, next *http.Request) bool {
				seen, called = next.Header.Get("X-Pt-Retry"), true
				return true
			})
			l := All(reader, setter)
			if tt.setterFirst {
				l = All(setter, reader)
			}
			next := ptNext(t)
			if !l.Allow(ptHistory("503"), next) {
				t.Fatal("Allow = false, want true")
			}
			if !called {
				t.Fatal("the second limiter was not called")
			}
			if seen != tt.wantSeen {
				t.Errorf("the reading limiter saw X-Pt-Retry %q, want %q", seen, tt.wantSeen)
			}
			if got := next.Header.Get("X-Pt-Retry"); got != "yes" {
				t.Errorf("next request X-Pt-Retry = %q after All, want %q", got, "yes")
			}
		})
	}
}

func TestLimiterFuncReceivesArguments(t *testing.T) {
	history := ptHistory("C", "503")
	next := ptNext(t)
	var gotLen int
	var gotNext *http.Request
	l := LimiterFunc(func(f []Failure, r *http.Request) bool {
		gotLen, gotNext = len(f), r
		return true
	})
	if !l.Allow(history, next) || gotLen != 2 || gotNext != next {
		t.Errorf("LimiterFunc got (%d failures, %p), want (2, %p)", gotLen, gotNext, next)
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := All(
		MaxErrors(3),
		MaxErrorResponses(5, 502, 503),
		MaxConnectErrors(2),
		LimiterFunc(func(_ []Failure, next *http.Request) bool {
			next.Header.Set("X-Pt-Seen", "1")
			return true
		}),
	)
	cases := []ptLimiterCase{
		{"C", true},
		{"C C C", false},
		{"502 503", true},
		{"500", false},
		{"R R R", true},
		{"R R R R", false},
		{"503 C C", true},
		{"C 502 C", true},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		c := cases[g%len(cases)]
		wg.Go(func() {
			for range 500 {
				history := ptHistory(strings.Fields(c.history)...)
				next, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
				if got := l.Allow(history, next); got != c.want {
					errs <- fmt.Sprintf("goroutine %d: Allow(%s) = %v, want %v", g, c.history, got, c.want)
					return
				}
				if c.want && next.Header.Get("X-Pt-Seen") != "1" {
					errs <- fmt.Sprintf("goroutine %d: header not set on its own request", g)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
