//go:build !unix

package runcmd

import (
	"errors"
	"syscall"
)

// On systems without process groups (Windows), an attempt is its command
// alone, as with --foreground. See procgroup_unix.go.

const groupsWork = false

func newGroup() *syscall.SysProcAttr { return nil }

func signalGroup(pgid int, sig syscall.Signal) error { return errors.ErrUnsupported }

func groupLeft(pgid int) bool { return false }

func reapGroup(pgid int) {}
