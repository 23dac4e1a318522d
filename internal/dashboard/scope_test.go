package dashboard

import (
	"net"
	"strings"
	"testing"
)

// The dashboard is served at a random .localhost name on 127.0.0.1 and
// ::1, and not at all on another loopback address, where the cookie of the
// address would reach every other user's server on it.
func TestDashboardHostOnlyWhereALocalhostNameLeads(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "127.0.0.2:0", "127.3.4.5:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err)
			continue
		}
		host, err := LoginHost(l)
		l.Close()
		switch addr {
		case "127.0.0.1:0", "[::1]:0":
			if err != nil || !strings.HasSuffix(strings.Split(host, ":")[0], ".localhost") {
				t.Errorf("%s: %q %v, want a .localhost name", addr, host, err)
			}
		default:
			if err == nil || host != "" || !strings.Contains(err.Error(), "--http 127.0.0.1:") {
				t.Errorf("%s: %q %v, want no dashboard and how to get one", addr, host, err)
			}
		}
	}
}

func TestSessionResumeRefusesCommandKeys(t *testing.T) {
	for _, sets := range [][]string{{"agent_command=id > /tmp/x"}, {"max_iterations=5", "verify_command=sh x"},
		{"agent=codex"}, {"prompt_file=/etc/passwd"}, {"env_file=/tmp/e"}, {"stop_file=/tmp/s.json"}, {"garbage"}} {
		if err := ResumeRefusal(sets); err == nil {
			t.Errorf("a dashboard session may resume with %q", sets)
		}
	}
	if err := ResumeRefusal([]string{"max_iterations=7", " max_cost = 5", "step_timeout=1h"}); err != nil {
		t.Errorf("limits refused: %v", err)
	}
}
