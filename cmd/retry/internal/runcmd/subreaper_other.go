//go:build !linux

package runcmd

// becomeSubreaper does nothing where the kernel has no such thing (see
// subreaper_linux.go): the init process waits for the orphans.
func becomeSubreaper() {}
