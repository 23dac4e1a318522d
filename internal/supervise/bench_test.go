package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkStartTrue is the supervisor's cost for one no-op step: spawn
// the wrapper, run `true`, record its status, reap. BenchmarkShTrue is
// the floor it is compared with: running `sh -c true` from Go.
func BenchmarkStartTrue(b *testing.B) {
	dir := b.TempDir()
	spec := specIn(dir, "true")
	spec.Env = os.Environ()
	for b.Loop() {
		p, err := Start(spec)
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
		if p.Exit().Code != 0 {
			b.Fatal(p.Exit())
		}
	}
}

// BenchmarkStartTrueNoCgroup is BenchmarkStartTrue where no cgroup can be
// used: the step's leftovers are looked for by scanning /proc.
func BenchmarkStartTrueNoCgroup(b *testing.B) {
	useCgroups = false
	defer func() { useCgroups = true }()
	BenchmarkStartTrue(b)
}

func BenchmarkShTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = filepath.Join
