package scheduler

import (
	"os"
	"slices"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/redact"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
)

// secretsOf is the redactor of a run's step environment: the env file's
// values, parsed and as written in the file (read afresh; one that cannot
// be read adds nothing), and the daemon's secret-looking variables. nil
// when redact_secrets is off.
func secretsOf(cfg config.Config) *redact.Redactor {
	if !cfg.RedactSecrets {
		return nil
	}
	var vars []string
	if cfg.EnvFile != "" {
		vars, _ = config.LoadEnvFile(cfg.EnvFile)
	}
	return redact.New(slices.Concat(vars, config.WrittenEnvValues(cfg.EnvFile)), os.Environ())
}

// useSecrets sets the redactor from the environment a step is given
// (envFile: the env file's variables it loaded).
func (r *runner) useSecrets(envFile []string) {
	if r.cfg.RedactSecrets {
		r.secrets = redact.New(slices.Concat(envFile, config.WrittenEnvValues(r.cfg.EnvFile)), os.Environ())
	}
}

// redactStep removes secret values from what is stored of a finished
// step and shown again: its error, the agent's final message and the
// names of its tests (pytest builds ids from parameters: test_login[<the
// key>]; they reach the next prompt, the dashboard and the postmortem).
// The step's log is the command's own output and stays as it was written.
func (r *runner) redactStep(st *storage.Step) {
	st.Error = r.secrets.String(st.Error)
	st.FinalMessage = r.secrets.String(st.FinalMessage)
	st.TestsFailedNames = redactAll(r.secrets, st.TestsFailedNames)
	st.TestsPassedNames = redactAll(r.secrets, st.TestsPassedNames)
	st.TestsIgnoredNames = redactAll(r.secrets, st.TestsIgnoredNames)
}

// redactAll redacts every string of names, in place, and returns it.
func redactAll(secrets *redact.Redactor, names []string) []string {
	for i, n := range names {
		names[i] = secrets.String(n)
	}
	return names
}

// redactResults returns results with secret values removed from their
// details (a custom_script's output is its result's reason), as stored in
// the evaluation history; results itself is not changed.
func (r *runner) redactResults(results []stop.Result) []stop.Result {
	if r.secrets == nil || len(r.secrets.Names()) == 0 {
		return results
	}
	out := slices.Clone(results)
	for i := range out {
		out[i].Reason = r.secrets.String(out[i].Reason)
		out[i].Err = r.secrets.String(out[i].Err)
	}
	return out
}
