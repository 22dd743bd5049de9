package runcmd

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// becomeSubreaper makes retry the parent of the processes its commands leave
// behind when they exit, in place of the init process: retry can then wait
// for them (reapGroup), so that an attempt's group is gone as soon as its
// processes have exited, even where the init process does not wait for
// orphans (a container whose first process is not an init), which would
// leave them as zombies that still count as members of the group.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
