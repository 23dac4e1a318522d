package api

import (
	"runtime/debug"
	"strings"
	"sync"
	"time"
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

// Commit and Date are the commit the binaries were built from and that
// commit's date (RFC 3339), as set at build time with -ldflags -X
// (scripts/release does, so that a build from a source tarball carries
// them too). Read them through [BuildCommit] and [BuildDate], which fall
// back to what the Go toolchain recorded (vcs.revision, vcs.time).
var Commit, Date string

// BuildCommit returns the VCS revision the binary was built from (with
// "+dirty" when the tree had changes), or "" when the build did not record
// one (go build -buildvcs=false, or a build outside a git checkout).
func BuildCommit() string { return buildVCS().commit }

// BuildDate returns the date of the commit the binary was built from
// (RFC 3339, UTC), or "". It is the commit's date, not the build's: a
// build of the same commit is the same binary.
func BuildDate() string { return buildVCS().date }

// VersionLine is the version with the commit and its date, as --version
// prints it: "v1.2.3 (commit 25ba6e3c8f1a, 2026-11-26T23:12:00Z)"; only
// what the build recorded is shown. A pseudo-version that Go made from the
// checkout (v0.0.0-20261126231200-25ba6e3c8f1a) already holds both.
func VersionLine() string { return versionLine(BuildVersion(), buildVCS()) }

func versionLine(version string, v vcsStamp) string {
	if c := strings.TrimSuffix(v.commit, "+dirty"); len(c) >= 12 && strings.Contains(version, "-"+c[:12]) {
		return version
	}
	var extra []string
	if v.commit != "" {
		c, dirty := strings.CutSuffix(v.commit, "+dirty")
		if len(c) > 12 {
			c = c[:12]
		}
		if dirty {
			c += "+dirty"
		}
		extra = append(extra, "commit "+c)
	}
	if v.date != "" {
		extra = append(extra, v.date)
	}
	if len(extra) == 0 {
		return version
	}
	return version + " (" + strings.Join(extra, ", ") + ")"
}

type vcsStamp struct{ commit, date string }

var buildVCS = sync.OnceValue(func() vcsStamp {
	info, ok := debug.ReadBuildInfo()
	v := vcsInfo(info, ok)
	if Commit != "" {
		v.commit = Commit
	}
	if Date != "" {
		v.date = Date
	}
	return v
})

// vcsInfo reads the commit and its date from build information.
func vcsInfo(info *debug.BuildInfo, ok bool) vcsStamp {
	var v vcsStamp
	if !ok {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				v.date = t.UTC().Format(time.RFC3339)
			}
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v.commit = rev + dirty
	}
	return v
}
