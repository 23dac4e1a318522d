// Package shquote quotes a string for a POSIX shell, for the commands loopd
// prints for people to copy (trust reports, land's commands to finish by
// hand) and writes into config values.
package shquote

import "strings"

// Quote returns s unchanged when it holds only characters no shell treats
// specially, else s in single quotes, each quote inside it written as
// quote, backslash, quote, quote (the shell's way to put one in).
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
