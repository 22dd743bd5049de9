package simcmd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Where stderr is not a terminal, progress is a plain line every few
// seconds with the share done and the time left (in virtual time: a
// policy's run reports every second, and takes ten).
func TestSimProgressPlainLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := newProgress(&buf, false)
		for i := range 2 {
			for s := range 10 {
				time.Sleep(time.Second)
				p.update(i, 2, "policy "+fmt.Sprint(i), float64(s+1)/10)
			}
		}
		p.done()
		want := "retry sim: 25% done, 1/2: policy 0, about 15s left\n" +
			"retry sim: 50% done, 1/2: policy 0, about 10s left\n" +
			"retry sim: 75% done, 2/2: policy 1, about 5s left\n" +
			"retry sim: 100% done, 2/2: policy 1, about 0s left\n"
		if buf.String() != want {
			t.Errorf("progress:\n%s\nwant:\n%s", buf.String(), want)
		}
		var quiet bytes.Buffer
		q := newProgress(&quiet, true)
		time.Sleep(time.Minute)
		q.update(0, 1, "x", 0.5)
		if quiet.Len() != 0 {
			t.Errorf("--quiet progress: %q", quiet.String())
		}
	})
}

// On a terminal, progress is one line redrawn in place, at most every
// progressRedraw, with the share done and the time left; done clears it.
func TestSimProgressOnATerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := newProgress(&buf, false)
		p.terminal = true // as newProgress finds a terminal
		p.update(0, 4, "no retries", 0)
		for range 3 {
			time.Sleep(time.Second)
			p.update(1, 4, "Standard", 0.5)
			p.update(1, 4, "Standard", 0.6) // too soon: not drawn
		}
		p.done()
		lines := strings.Split(buf.String(), "\r")
		want := []string{"", "0% done, 1/4: no retries",
			"37% done, 2/4: Standard, about 2s left ",
			"37% done, 2/4: Standard, about 3s left ",
			"37% done, 2/4: Standard, about 5s left "}
		if len(lines) != len(want)+2 || strings.TrimSpace(lines[len(lines)-2]) != "" || lines[len(lines)-1] != "" {
			t.Fatalf("progress on a terminal: %q; want %d redraws and the line cleared", buf.String(), len(want)-1)
		}
		for i, w := range want {
			if strings.TrimRight(lines[i], " ") != strings.TrimRight(w, " ") {
				t.Errorf("redraw %d: %q, want %q", i, lines[i], w)
			}
		}
	})
}
