package homeguard

import (
	"os"
	"path/filepath"
	"testing"
)

// Only a user-private group makes a group-writable directory above the
// home safe: a group of the user's name with no other member and no other
// account in it by its primary gid.
func TestPrivateGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the fixtures name the user root (uid 0)")
	}
	passwd := "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	for _, tt := range []struct {
		name, group, passwd string
		gid                 int
		want                bool
	}{
		{"own group, no members", "root:x:0:\nusers:x:100:\n", passwd, 0, true},
		{"own group, the user listed", "root:x:0:root\n", passwd, 0, true},
		{"own group with another member", "root:x:0:root,nobody\n", passwd, 0, false},
		{"another account's primary group", "root:x:0:\n", passwd + "op:x:1001:0::/home/op:/bin/sh\n", 0, false},
		{"a shared group", "root:x:0:\nusers:x:100:\n", passwd, 100, false},
		{"a group of another name", "wheel:x:0:\n", passwd, 0, false},
		{"a group not in the file", "users:x:100:\n", passwd, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			g, p := filepath.Join(dir, "group"), filepath.Join(dir, "passwd")
			if err := os.WriteFile(g, []byte(tt.group), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tt.passwd), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := privateGroup(tt.gid, 0, g, p); got != tt.want {
				t.Errorf("privateGroup(%d) = %v, want %v", tt.gid, got, tt.want)
			}
		})
	}
}
