package simcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// progress shows how far a run is, with the time it has left: on a
// terminal one line redrawn in place, elsewhere (a log, CI) a plain line
// every progressEvery, so that a long run is seen to be alive.
type progress struct {
	w        io.Writer // nil: no progress
	terminal bool
	width    int       // of the line on the terminal
	start    time.Time // of the run
	last     time.Time // when a line was last shown
}

const (
	progressRedraw = 100 * time.Millisecond // on a terminal
	progressEvery  = 5 * time.Second        // elsewhere
)

func newProgress(w io.Writer, quiet bool) *progress {
	if quiet {
		return &progress{}
	}
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		p.terminal = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	p.last = p.start
	return p
}

// update shows that policy i of n is running, frac of it done.
func (p *progress) update(i, n int, name string, frac float64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	since := now.Sub(p.last)
	if p.terminal && since < progressRedraw && p.width > 0 || !p.terminal && since < progressEvery {
		return
	}
	p.last = now
	done := (float64(i) + min(max(frac, 0), 1)) / float64(n)
	left := ""
	if elapsed := now.Sub(p.start); elapsed >= time.Second && done > 0.005 {
		left = ", about " + formatLeft(time.Duration(float64(elapsed)*(1-done)/done)) + " left"
	}
	line := fmt.Sprintf("%d%% done, %d/%d: %s%s", int(100*done), i+1, n, name, left)
	if !p.terminal {
		fmt.Fprintln(p.w, "retry sim:", line)
		return
	}
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.width-utf8.RuneCountInString(line), 0)))
	p.width = utf8.RuneCountInString(line)
}

// formatLeft rounds an estimate of the time left to what it is worth.
func formatLeft(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Second).String()
}

func (p *progress) done() {
	if p.terminal && p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	}
}
