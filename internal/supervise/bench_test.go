package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
// used and the process is not its steps' subreaper (as for steps adopted
// from an earlier daemon): the step's leftovers are looked for by scanning
// /proc.
func BenchmarkStartTrueNoCgroup(b *testing.B) {
	useCgroups = false
	defer func() { useCgroups = true }()
	BenchmarkStartTrue(b)
}

// BenchmarkStartTrueNoCgroupSubreaper is the daemon without cgroups: the
// subreaper of its steps, finding their leftovers below its children.
func BenchmarkStartTrueNoCgroupSubreaper(b *testing.B) {
	useCgroups = false
	defer func() { useCgroups = true }()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil || !canListChildren() {
		b.Skip("cannot be a child subreaper here")
	}
	isSubreaper.Store(true)
	defer func() {
		isSubreaper.Store(false)
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	}()
	BenchmarkStartTrue(b)
}

func BenchmarkShTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunSteps is a run's no-op steps one after the other, as the
// scheduler starts them (gated, then opened): each in a new cgroup (no
// next step named, so none is handed on), and in the run's cgroup handed
// on from step to step (see offerCgroup).
func BenchmarkRunSteps(b *testing.B) {
	for _, handOn := range []bool{false, true} {
		name := "new-cgroup"
		if handOn {
			name = "handed-on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			run := fmt.Sprintf("bench%d-%d", os.Getpid(), time.Now().UnixNano())
			seq := 0
			for b.Loop() {
				seq++
				spec := runSpec(dir, run, seq, "true")
				spec.Env = os.Environ()
				if !handOn {
					spec.Next = ""
				}
				p, err := Start(spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Open(); err != nil {
					b.Fatal(err)
				}
				<-p.Done()
				if p.Exit().Code != 0 {
					b.Fatal(p.Exit())
				}
			}
		})
	}
}
