package api

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "dev"},
		{"a build from a checkout", &debug.BuildInfo{Main: debug.Module{Path: "github.com/loopd/loopd", Version: "(devel)"}}, true, "dev"},
		{"no main version", &debug.BuildInfo{}, true, "dev"},
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Path: "github.com/loopd/loopd", Version: "v1.4.0"}}, true, "v1.4.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := moduleVersion(tt.info, tt.ok); got != tt.want {
				t.Fatalf("moduleVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVCSInfo(t *testing.T) {
	setting := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want vcsStamp
	}{
		{"no build info", nil, false, vcsStamp{}},
		{"built with -buildvcs=false", setting("GOOS", "linux"), true, vcsStamp{}},
		{"a clean checkout", setting("vcs.revision", "25ba6e3c0123456789abcdef0123456789abcdef", "vcs.time", "2026-11-26T23:12:00Z", "vcs.modified", "false"),
			true, vcsStamp{"25ba6e3c0123456789abcdef0123456789abcdef", "2026-11-26T23:12:00Z"}},
		{"a tree with changes, a time with an offset", setting("vcs.revision", "abc", "vcs.time", "2026-11-27T01:12:00+02:00", "vcs.modified", "true"),
			true, vcsStamp{"abc+dirty", "2026-11-26T23:12:00Z"}},
		{"an unreadable time", setting("vcs.revision", "abc", "vcs.time", "yesterday"), true, vcsStamp{"abc", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := vcsInfo(tt.info, tt.ok); got != tt.want {
				t.Fatalf("vcsInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	const rev = "25ba6e3c0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, version string
		vcs           vcsStamp
		want          string
	}{
		{"nothing recorded", "dev", vcsStamp{}, "dev"},
		{"a release", "v1.2.3", vcsStamp{rev, "2026-11-26T23:12:00Z"}, "v1.2.3 (commit 25ba6e3c0123, 2026-11-26T23:12:00Z)"},
		{"a tree with changes", "dev", vcsStamp{rev + "+dirty", "2026-11-26T23:12:00Z"}, "dev (commit 25ba6e3c0123+dirty, 2026-11-26T23:12:00Z)"},
		{"only a commit", "dev", vcsStamp{"abc", ""}, "dev (commit abc)"},
		{"Go's pseudo-version of the checkout", "v0.0.0-20261126231200-25ba6e3c0123+dirty", vcsStamp{rev + "+dirty", "2026-11-26T23:12:00Z"},
			"v0.0.0-20261126231200-25ba6e3c0123+dirty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.version, tt.vcs); got != tt.want {
				t.Fatalf("versionLine = %q, want %q", got, tt.want)
			}
		})
	}
}
