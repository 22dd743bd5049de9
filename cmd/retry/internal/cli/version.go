package cli

import "runtime/debug"

// Version is the module version the binary was built from, as go install
// records it; "(devel)" for a build in a work tree.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
