package config

import "testing"

// Every boolean key reads a value the same way (notify_desktop and redact_secrets
// once had parsers that disagreed on "t", "f", "tRuE" and quoted blanks), and a
// value it refuses is an error naming the key, never a silent reading.
func TestBooleanKeysReadAlike(t *testing.T) {
	cases := []struct {
		value   string
		want    bool
		problem string // "" when the value is accepted
	}{
		{value: "true", want: true}, {value: "TRUE", want: true}, {value: "tRuE", want: true}, {value: "yes", want: true},
		{value: "On", want: true}, {value: "1", want: true}, {value: `" true "`, want: true},
		{value: "false"}, {value: "False"}, {value: "NO"}, {value: "off"}, {value: "0"}, {value: `" off"`},
		{value: "t", problem: `must be true or false, got "t" (write true in full)`},
		{value: "F", problem: `must be true or false, got "F" (write false in full)`},
		{value: "maybe", problem: `must be true or false, got "maybe"`},
		{value: "2", problem: `must be true or false, got "2"`},
		{value: `""`, problem: `must be true or false, got ""`},
	}
	for _, key := range []string{"notify_desktop", "redact_secrets"} {
		for _, tc := range cases {
			t.Run(key+"="+tc.value, func(t *testing.T) {
				w := newWorkspace(t, map[string]string{"PROMPT.md": "goal"})
				writeFile(t, w.config(), key+"="+tc.value+"\n")
				c, err := w.load()
				if tc.problem != "" {
					if want := w.expand("{cfg}:1: " + key + ": " + tc.problem); err == nil || err.Error() != want {
						t.Fatalf("error %v, want %s", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]bool{"notify_desktop": c.NotifyDesktop, "redact_secrets": c.RedactSecrets}[key]
				if got != tc.want {
					t.Errorf("%s=%s read as %v, want %v", key, tc.value, got, tc.want)
				}
			})
		}
	}
}
