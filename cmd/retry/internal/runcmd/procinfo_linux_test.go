package runcmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ignores reports whether process pid ignores sig, from the SigIgn mask of
// /proc/pid/status; ok is false when that cannot be read.
func ignores(pid int, sig syscall.Signal) (ignored, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if mask, found := strings.CutPrefix(line, "SigIgn:"); found {
			m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			if err != nil {
				return false, false
			}
			return m&(1<<(uint(sig)-1)) != 0, true
		}
	}
	return false, false
}

// exitedUnwaited reports whether child process pid has exited and waits to
// be waited for (a zombie), without waiting for it; false where that
// cannot be read.
func exitedUnwaited(pid int) bool { return procState(pid) == "Z" }
