package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/homeguard"
)

// A home, a directory above it or a file in it that another user could
// change is refused before anything is written.
func TestRunRefusesAHomeAnotherUserCanChange(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files owned by another uid")
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, root string) (home string)
		want  []string
	}{
		{"home owned by another user", func(t *testing.T, root string) string {
			home := filepath.Join(root, "home")
			mkdir(t, home, 0o700)
			chown(t, home)
			return home
		}, []string{"LOOPD_HOME", "belongs to uid 65534", "not to uid 0", "chown -R 0"}},
		{"token owned by another user", func(t *testing.T, root string) string {
			home := filepath.Join(root, "home")
			mkdir(t, home, 0o700)
			tok := filepath.Join(home, TokenFile)
			if err := os.WriteFile(tok, []byte(strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			chown(t, tok)
			return home
		}, []string{TokenFile, "belongs to uid 65534"}},
		{"parent owned by another user", func(t *testing.T, root string) string {
			parent := filepath.Join(root, "theirs")
			mkdir(t, parent, 0o755)
			chown(t, parent)
			home := filepath.Join(parent, "home")
			mkdir(t, home, 0o700)
			return home
		}, []string{"theirs", "above LOOPD_HOME", "belongs to uid 65534"}},
		{"parent writable by everyone, not sticky", func(t *testing.T, root string) string {
			parent := filepath.Join(root, "open")
			mkdir(t, parent, 0o777)
			return filepath.Join(parent, "home") // not created yet: nothing may be
		}, []string{"open", "writable by every user", "chmod o-w"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			home := tt.setup(t, root)
			before := tree(t, root)
			err := Run(context.Background(), Options{Home: home})
			var he *homeguard.OwnerError
			if !errors.As(err, &he) {
				t.Fatalf("Run = %v, want a homeguard.OwnerError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if after := tree(t, root); after != before {
				t.Errorf("the refused daemon changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// tree lists every path under root with its mode and owner.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A home given as a symlink counts only when the link is the user's too:
// another user's link (in /tmp) to a directory of the user's passes every
// check of its target, then can be pointed at a directory of theirs.
func TestRunRefusesAHomeLinkOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a symlink owned by another uid")
	}
	root := t.TempDir()
	target := filepath.Join(root, "mine")
	mkdir(t, target, 0o700)
	link := filepath.Join(root, "home")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a daemon that starts stops at once
	err := Run(ctx, Options{Home: link})
	var he *homeguard.OwnerError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "a symlink") || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("Run on another user's link to a home = %v, want a homeguard.OwnerError naming the link's owner", err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the refused daemon wrote %d entries into the home", len(entries))
	}
}
