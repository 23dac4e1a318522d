package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/homeguard"
)

// The socket's directory is checked when the socket is bound, not only at
// start: made by another user between the home's check and the listen
// (LOOPD_SOCKET in /tmp), or open to others, it is refused and no socket
// is bound in it.
func TestListenUnixRefusesADirectoryOthersControl(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a directory owned by another uid")
	}
	for _, tt := range []struct {
		name       string
		mode       os.FileMode
		owner, gid int
		want       string
	}{
		{"owned by another user", 0o755, 65534, 65534, "belongs to uid 65534"},
		{"writable by others", 0o777, 0, 0, "writable by others"},
		{"writable by a shared group", 0o775, 0, 100, "writable by others"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sd")
			mkdir(t, dir, tt.mode)
			if err := os.Chown(dir, tt.owner, tt.gid); err != nil {
				t.Fatal(err)
			}
			l, err := listenUnix(filepath.Join(dir, "loopd.sock"))
			if err == nil {
				l.Close()
				t.Fatalf("listenUnix in a directory %s: bound", tt.name)
			}
			var he *homeguard.OwnerError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("listenUnix = %v, want a refusal saying %q", err, tt.want)
			}
			if _, err := os.Lstat(filepath.Join(dir, "loopd.sock")); err == nil {
				t.Error("a socket was bound in it")
			}
		})
	}
	// A directory of the daemon's own, made by it or not, is used, and so
	// is a sticky one (/tmp): nobody else can remove the socket there.
	for _, mode := range []os.FileMode{0o700, 0o755, 0o777 | os.ModeSticky} {
		dir := filepath.Join(t.TempDir(), "sd")
		mkdir(t, dir, mode)
		l, err := listenUnix(filepath.Join(dir, "loopd.sock"))
		if err != nil {
			t.Fatalf("listenUnix in the daemon's own %04o directory: %v", mode, err)
		}
		l.Close()
	}
}
