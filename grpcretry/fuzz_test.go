package grpcretry

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParsePushback: no value panics; a value is a wait exactly when it is
// decimal digits (spaces and tabs around them allowed), the wait is never
// negative and saturates instead of overflowing, and every other value, or
// two values, stops retrying.
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"", "0", "250", " 7\t", "-1", "-0", "+5", "1e3", "0x10", "1.5", "９", "9223372036854775807", "99999999999999999999999", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, stop := parsePushback([]string{v})
		trimmed := strings.Trim(v, " \t")
		digits := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
		if stop == digits {
			t.Fatalf("%q: stop %v, but digits %v", v, stop, digits)
		}
		if stop {
			if d != 0 {
				t.Fatalf("%q: stop with a wait %v", v, d)
			}
		} else {
			if d < 0 {
				t.Fatalf("%q: negative wait %v", v, d)
			}
			if ms, err := strconv.ParseInt(trimmed, 10, 64); err == nil && ms <= math.MaxInt64/int64(time.Millisecond) {
				if d != time.Duration(ms)*time.Millisecond {
					t.Fatalf("%q: %v, want %d ms", v, d, ms)
				}
			} else if d != math.MaxInt64 {
				t.Fatalf("%q: %v, want the saturated wait", v, d)
			}
		}
		if _, stop := parsePushback([]string{v, v}); !stop {
			t.Fatalf("two values %q did not stop", v)
		}
	})
}
