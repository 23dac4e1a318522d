package redact

import (
	"slices"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := New(
		[]string{"API_BASE=https://api.example.test", "DEBUG=true", "DB_URL=postgres://u:hunter2hunter2@db/x", "PASS=hunter2hunter2"},
		[]string{"ANTHROPIC_API_KEY=sk-ant-0123456789", "HOME=/home/someone-long", "GH_TOKEN=short", "MY_PASSWORD=correct horse"},
	)
	tests := []struct{ name, in, want string }{
		{"env file value, any name", "calling https://api.example.test/v1", "calling [REDACTED:API_BASE]/v1"},
		{"short values stay", "DEBUG is true", "DEBUG is true"},
		{"daemon secret by name", "key: sk-ant-0123456789.", "key: [REDACTED:ANTHROPIC_API_KEY]."},
		{"daemon non-secret name stays", "in /home/someone-long", "in /home/someone-long"},
		{"short daemon secret stays", "token short", "token short"},
		{"containing secret replaced whole", "url postgres://u:hunter2hunter2@db/x", "url [REDACTED:DB_URL]"},
		{"contained secret alone", "pw hunter2hunter2", "pw [REDACTED:PASS]"},
		{"spaces in value", "it is correct horse!", "it is [REDACTED:MY_PASSWORD]!"},
		{"repeated", "sk-ant-0123456789sk-ant-0123456789", "[REDACTED:ANTHROPIC_API_KEY][REDACTED:ANTHROPIC_API_KEY]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if !slices.Contains(r.Names(), "DB_URL") || slices.Contains(r.Names(), "HOME") {
		t.Errorf("names = %v", r.Names())
	}
	var none *Redactor
	if none.String("x") != "x" || New(nil, nil).String("sk-ant-0123456789") != "sk-ant-0123456789" {
		t.Error("an empty redactor changed text")
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{"OPENAI_API_KEY": true, "github_token": true, "DB_PASSWORD": true,
		"AWS_SECRET_ACCESS_KEY": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "PATH": false, "HOME": false, "LANG": false} {
		if SecretName(name) != want {
			t.Errorf("SecretName(%s) = %v", name, !want)
		}
	}
}
