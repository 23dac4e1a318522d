//go:build !unix

package procgroup

import "os/exec"

// Set leaves cmd as it is: without process groups, cancellation kills the
// command alone (exec.CommandContext's default).
func Set(*exec.Cmd) {}
