//go:build !unix

package stop

import "os/exec"

// setProcessGroup leaves cmd as it is: without process groups, cancellation kills the
// script alone (exec.CommandContext's default).
func setProcessGroup(*exec.Cmd) {}
