package dashboard

import (
	"net"
	"strings"

	"github.com/loopd/loopd/internal/api"
)

// LoginHost is the host:port a login URL names for the listener l. On
// loopback (or a wildcard address, which includes it) that is a fresh,
// unguessable <random>.localhost name, so the session cookie, which
// browsers send to every port of its host, reaches no other user's server
// on 127.0.0.1; the daemon holds the port on both loopback addresses
// (tcpguard.ListenLoopback), since a browser tries ::1 first for a
// .localhost name. On a network address (--http-allow-remote) it is that
// address: a browser elsewhere cannot resolve a .localhost name to this
// machine, and that address's cookies go to its every port.
//
// Any other loopback address (127.0.0.2, 127.1.2.3) serves no dashboard:
// a .localhost name resolves to 127.0.0.1 and ::1, not to it, and a
// cookie of the address itself would reach every server another user runs
// on it (an <img> of theirs that the owner's browser loads is enough). The
// error says so; the bearer token still opens the API there.
func LoginHost(l net.Listener) (string, error) {
	host, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return l.Addr().String(), nil
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && (ip.IsUnspecified() || ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)):
		return NewLoopbackHost(port), nil
	case ip != nil && ip.IsLoopback():
		return "", api.Errorf(api.CodeConflict, "this loopd serves no dashboard on %s: a browser's cookie for that address "+
			"would reach every server another user runs on it; start loopd with --http 127.0.0.1:%s (or ::1, localhost) "+
			"for the dashboard (the bearer token still opens the API on %s)", net.JoinHostPort(host, port), port, host)
	}
	return net.JoinHostPort(host, port), nil
}

// resumeKeys are the settings a dashboard session may change when it
// resumes a run: limits and timeouts. Any other key can run a command
// (agent_command, verify_command, stop_file's scripts, the agent preset)
// or read a file (prompt_file, env_file), which only the owner's own
// loopctl (or the bearer token) may ask for.
var resumeKeys = map[string]bool{
	"max_iterations": true, "max_duration": true, "max_tokens": true, "max_input_tokens": true,
	"max_output_tokens": true, "max_cost": true, "max_consecutive_implementation_failures": true,
	"max_consecutive_review_failures": true, "max_consecutive_verification_failures": true,
	"max_task_failures": true, "no_progress_iterations": true, "step_timeout": true, "idle_timeout": true,
	"max_api_wait": true,
}

// ResumeRefusal is the error for a dashboard session's resume that sets a
// key beyond resumeKeys, nil when every key is allowed.
func ResumeRefusal(sets []string) error {
	for _, s := range sets {
		key, _, _ := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !resumeKeys[key] {
			return api.Errorf(api.CodeForbidden, "refused: the dashboard may change only limits and timeouts on resume (max_iterations, max_cost, step_timeout…); "+
				"set %q with `loopctl resume --set`", key)
		}
	}
	return nil
}
