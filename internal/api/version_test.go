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
