package api

import (
	"runtime/debug"
	"sync"
)

// Version is the version of both binaries as set at build time with
// -ldflags "-X github.com/loopd/loopd/internal/api.Version=v1.2.3"
// (scripts/release does). Read it through [BuildVersion], which falls back
// to the module version when it was not set.
var Version = "dev"

// BuildVersion returns the version to show: Version when the build set it;
// else the module version of a `go install github.com/loopd/loopd/cmd/...@v1.2.3`
// build, from the binary's build information; else "dev" (a build from a
// checkout, whose module version is "(devel)").
func BuildVersion() string { return buildVersion() }

var buildVersion = sync.OnceValue(func() string {
	if Version != "dev" && Version != "" {
		return Version
	}
	return moduleVersion(debug.ReadBuildInfo())
})

// moduleVersion picks the main module's version from build information, or
// "dev" when there is none worth showing.
func moduleVersion(info *debug.BuildInfo, ok bool) string {
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "dev"
	}
	return info.Main.Version
}

// BuildCommit returns the VCS revision the binary was built from (with
// "+dirty" when the tree had changes), or "" when the build did not record
// one (go build -buildvcs=false, or a build outside a git checkout).
func BuildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
