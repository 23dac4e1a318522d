package config

import "testing"

func TestRedactSecretsKey(t *testing.T) {
	ws := t.TempDir()
	if c, err := Load(LoadOptions{Workspace: ws, UserConfig: "-", Sets: []string{"prompt=g"}}); err != nil || !c.RedactSecrets {
		t.Errorf("default: %v, %v; want on", c.RedactSecrets, err)
	}
	for v, want := range map[string]bool{"false": false, "OFF": false, "0": false, "yes": true, "true": true} {
		c, err := Load(LoadOptions{Workspace: ws, UserConfig: "-", Sets: []string{"prompt=g", "redact_secrets=" + v}})
		if err != nil || c.RedactSecrets != want {
			t.Errorf("redact_secrets=%s: %v, %v; want %v", v, c.RedactSecrets, err, want)
		}
	}
	_, err := Load(LoadOptions{Workspace: ws, UserConfig: "-", Sets: []string{"prompt=g", "redact_secrets=maybe"}})
	if err == nil || err.Error() != `--set 2: redact_secrets: must be true or false, got "maybe"` {
		t.Errorf("bad value: %v", err)
	}
	// A run frozen before the key existed decodes with redaction on.
	var c Config
	if err := c.UnmarshalJSON([]byte(`{"agent":"command"}`)); err != nil || !c.RedactSecrets {
		t.Errorf("old frozen config: %v, %v", c.RedactSecrets, err)
	}
}
