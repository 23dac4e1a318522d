// Package redact replaces the values of a step environment's secrets with
// [REDACTED:NAME] in text loopd stores and feeds back: an agent that prints
// an API key would otherwise see it again in its next prompt, and it
// would stay in the database and the postmortem.
//
// It is a safety net, not a guarantee: a secret that is shorter than
// MinLength, transformed (base64, split across lines) or not in the
// environment is not recognised.
package redact

import (
	"cmp"
	"slices"
	"strings"
)

// MinLength is the shortest value redacted: shorter values (true, 1,
// debug) are too common in ordinary text to replace.
const MinLength = 8

// secretWords mark a variable of the daemon's environment as a secret
// when its name contains one (case-insensitive).
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}

// SecretName reports whether a variable's name looks like a secret's:
// it contains KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL.
func SecretName(name string) bool {
	up := strings.ToUpper(name)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(up, w) })
}

// Redactor replaces secret values in text. The zero value and nil
// replace nothing.
type Redactor struct {
	r     *strings.Replacer
	names []string
}

// New returns a Redactor for every value of the env file's variables
// (envFile, "NAME=value") and the values of the daemon's variables (env)
// whose names look like secrets; values shorter than MinLength are left
// alone. A value set under several names is redacted under the first
// name in sorted order.
func New(envFile, env []string) *Redactor {
	type secret struct{ name, value string }
	var secrets []secret
	seen := map[string]bool{}
	add := func(kv string, all bool) {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < MinLength || (!all && !SecretName(name)) {
			return
		}
		secrets = append(secrets, secret{name, value})
	}
	for _, kv := range envFile {
		add(kv, true)
	}
	for _, kv := range env {
		add(kv, false)
	}
	// Longest first: strings.Replacer tries its pairs in argument order at
	// each position, so a secret that contains another is replaced whole.
	slices.SortStableFunc(secrets, func(a, b secret) int {
		return cmp.Or(cmp.Compare(len(b.value), len(a.value)), cmp.Compare(a.name, b.name))
	})
	var pairs, names []string
	for _, s := range secrets {
		if seen[s.value] {
			continue
		}
		seen[s.value] = true
		pairs = append(pairs, s.value, "[REDACTED:"+s.name+"]")
		names = append(names, s.name)
	}
	if len(pairs) == 0 {
		return &Redactor{}
	}
	return &Redactor{r: strings.NewReplacer(pairs...), names: names}
}

// String returns s with every secret value replaced.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil || s == "" {
		return s
	}
	return r.r.Replace(s)
}

// Names lists the variables whose values are redacted, longest value
// first.
func (r *Redactor) Names() []string {
	if r == nil {
		return nil
	}
	return r.names
}
