package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/httpretry"
)

// writeOut is what -w/--write-out reports once the call is over.
type writeOut struct {
	code    int           // the final status, 0 if no response came
	retries int           // attempts made minus one
	total   time.Duration // from the first attempt to the end of the body
}

// expand replaces, in format, the variables curl users know: %{http_code},
// %{num_retries} and %{time_total} (seconds, to the microsecond, as curl
// prints it), and the escapes \n, \r and \t. An unknown variable is left as
// it is, so that a typo shows in the output.
func (w writeOut) expand(format string) string {
	return strings.NewReplacer(
		"%{http_code}", fmt.Sprintf("%03d", w.code),
		"%{response_code}", fmt.Sprintf("%03d", w.code),
		"%{num_retries}", strconv.Itoa(w.retries),
		"%{time_total}", fmt.Sprintf("%.6f", w.total.Seconds()),
		`\n`, "\n", `\r`, "\r", `\t`, "\t",
	).Replace(format)
}

// printWriteOut writes the -w format to w, once the call that began at
// begin is over, with what report and wo hold by then.
func (c *httpConfig) printWriteOut(w io.Writer, wo *writeOut, report *httpretry.Report, begin time.Time) {
	wo.retries, wo.total = max(report.Attempts-1, 0), time.Since(begin)
	fmt.Fprint(w, wo.expand(c.writeOut))
}
