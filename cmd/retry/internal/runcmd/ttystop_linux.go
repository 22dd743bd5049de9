package runcmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// watchTerminalStops tells the user, once, when a process of the attempt
// that pid leads is stopped while retry runs in the foreground of its
// terminal: the kernel stops a process that reads the terminal (or changes
// its modes) from outside the terminal's foreground process group, as an
// attempt is unless --foreground, and without a word it would look hung.
// It returns the function that ends the watch.
func (r *runner) watchTerminalStops(pid int) (end func()) {
	if !r.group || r.c.quiet || !r.hadTerminal {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if r.isSuspended() || !inForeground(os.Getpid()) {
				continue // stopped with retry (Ctrl-Z), or retry is in the background
			}
			if p, name, ok := stoppedInGroup(pid); ok {
				fmt.Fprintf(r.std.Err, "retry: %s (pid %d) is stopped, as the kernel stops a process that uses the terminal "+
					"from a process group of its own; run it with retry run --foreground to give it the terminal\n", name, p)
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// stoppedInGroup returns a process of the group pgid that is stopped, looked
// for among the process pgid, which leads the group, and its descendants,
// and its name.
func stoppedInGroup(pgid int) (pid int, name string, ok bool) {
	queue := []int{pgid}
	for n := 0; len(queue) > 0 && n < 100; n++ {
		p := queue[0]
		queue = queue[1:]
		state, group, name := procStat(p)
		if group == pgid && state == "T" {
			return p, name, true
		}
		queue = append(queue, procChildren(p)...)
	}
	return 0, "", false
}

// procStat returns the state, the process group and the name of the process
// pid from /proc/PID/stat.
func procStat(pid int) (state string, pgrp int, name string) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, ""
	}
	return parseProcStat(string(data))
}

// parseProcStat reads "pid (name) state ppid pgrp ..."; the name may hold
// spaces and parentheses. It returns zero values for what it cannot read.
func parseProcStat(s string) (state string, pgrp int, name string) {
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, ""
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 3 {
		return "", 0, ""
	}
	pgrp, _ = strconv.Atoi(fields[2])
	return fields[0], pgrp, s[open+1 : closing]
}

// procChildren returns the children of the process pid, from
// /proc/PID/task/PID/children; none where the kernel does not keep it.
func procChildren(pid int) []int {
	p := strconv.Itoa(pid)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return nil
	}
	var children []int
	for f := range strings.FieldsSeq(string(data)) {
		if c, err := strconv.Atoi(f); err == nil {
			children = append(children, c)
		}
	}
	return children
}
