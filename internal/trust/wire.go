package trust

import "github.com/loopd/loopd/internal/api"

// Wire is the verdict's wire form, as `loopctl trust` shows it: every
// list present (empty, not null) and the time it was trusted before only
// when it was.
func (v Verdict) Wire() api.TrustFile {
	f := api.TrustFile{Path: v.File.Path, Kind: string(v.File.Kind), SHA256: v.File.SHA256, Status: string(v.Status),
		Changes: v.Changes, Commands: []api.TrustCommand{}, Env: v.File.Env, Settings: v.File.Settings,
		Agent: v.File.Agent, Files: v.File.Files, Parent: v.File.Parent}
	if !v.TrustedAt.IsZero() {
		f.PreviouslyTrustedAt = &api.Time{Time: v.TrustedAt}
	}
	for _, c := range v.File.Commands {
		f.Commands = append(f.Commands, api.TrustCommand{Key: c.Key, Command: c.Command})
	}
	if f.Env == nil {
		f.Env = []string{}
	}
	if f.Settings == nil {
		f.Settings = []string{}
	}
	f.EnvShown = []api.TrustSetting{}
	for _, s := range v.File.EnvShown {
		f.EnvShown = append(f.EnvShown, api.TrustSetting{Key: s.Key, Value: s.Value})
	}
	f.Values = []api.TrustSetting{}
	for _, s := range v.File.Values {
		f.Values = append(f.Values, api.TrustSetting{Key: s.Key, Value: s.Value})
	}
	return f
}
