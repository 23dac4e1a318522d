package e2e

import (
	"bytes"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent that prints a secret from .env: loopd keeps it out of the next
// prompt's feedback, the stored final message and error, the events and
// the postmortem. Only the step's own log (the agent's output, as
// written) holds it.
func TestSecretsAreRedacted(t *testing.T) {
	const secret = "tok-7d1e0c5a9b3f4e21"
	e := newEnv(t)
	e.startDaemon()
	e.writeFile("agent.sh", `#!/bin/sh
cat > "$LOOP_WORKSPACE/.prompt-$LOOP_STEP"
echo "connecting with $SERVICE_TOKEN"
if [ "$LOOP_ITERATION" -ge 2 ]; then
  echo "all done, token was $SERVICE_TOKEN"
  echo "<promise>COMPLETE</promise>"
  exit 0
fi
printf '{"type":"result","subtype":"success","is_error":true,"result":"API Error: the server refused %s","session_id":"s1","total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}\n' "$SERVICE_TOKEN"
exit 0
`, 0o755)
	e.writeFile(".env", "SERVICE_TOKEN="+secret+"\n", 0o600)
	e.config("agent=command", "agent_command=./agent.sh")
	// A custom_script's output is its condition's reason, kept in the
	// evaluation history.
	e.writeFile("check.sh", "#!/bin/sh\necho \"no luck with $SERVICE_TOKEN\" >&2\nexit 1\n", 0o755)
	e.writeFile(".loop/stop.json", `{"success_conditions":[{"type":"custom_script","script":"check.sh"}]}`, 0o644)
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	prompt, err := os.ReadFile(filepath.Join(e.ws, ".prompt-2"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(prompt), secret) || !strings.Contains(string(prompt), "[REDACTED:SERVICE_TOKEN]") {
		t.Errorf("the second prompt's feedback:\n%s", prompt)
	}
	steps := e.steps(id)
	if len(steps) != 2 || !strings.Contains(steps[0].Error, "[REDACTED:SERVICE_TOKEN]") {
		t.Errorf("the failed step's error: %+v", steps)
	}
	pm := e.must("postmortem", id)
	if strings.Contains(pm, secret) {
		t.Errorf("postmortem holds the secret:\n%s", pm)
	}
	if out := e.must("status", id, "--json", "--debug"); !strings.Contains(out, "no luck with [REDACTED:SERVICE_TOKEN]") {
		t.Errorf("the script's redacted output is not in the evaluation history:\n%s", out)
	}
	for _, out := range []string{e.must("status", id, "--json", "--debug"), e.must("steps", id, "--json"), e.must("events", id, "--json")} {
		if strings.Contains(out, secret) {
			t.Errorf("loopctl output holds the secret:\n%s", out)
		}
	}
	// Everything loopd keeps (the database, prompts, postmortem) but the
	// agent's own logs is free of it.
	var logs int
	err = filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(secret)) {
			return nil
		}
		if strings.HasSuffix(path, "-implementation.log") {
			logs++
			return nil
		}
		t.Errorf("%s holds the secret", strings.TrimPrefix(path, e.home))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if logs != 2 {
		t.Errorf("%d step logs hold the agent's output as written, want 2", logs)
	}
	var final string
	if err := queryDB(e, "SELECT final_message FROM steps WHERE seq = 2", &final); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(final, "token was [REDACTED:SERVICE_TOKEN]") {
		t.Errorf("stored final message: %q", final)
	}
}

// With redact_secrets=false loopd feeds the output back as it is.
func TestSecretsRedactionOff(t *testing.T) {
	const secret = "tok-7d1e0c5a9b3f4e21"
	e := newEnv(t)
	e.startDaemon()
	e.writeFile("agent.sh", `#!/bin/sh
cat > "$LOOP_WORKSPACE/.prompt-$LOOP_STEP"
echo "connecting with $SERVICE_TOKEN"
[ "$LOOP_ITERATION" -ge 2 ] && { echo "<promise>COMPLETE</promise>"; exit 0; }
exit 1
`, 0o755)
	e.writeFile(".env", "SERVICE_TOKEN="+secret+"\n", 0o600)
	e.config("agent=command", "agent_command=./agent.sh", "redact_secrets=false")
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	prompt, _ := os.ReadFile(filepath.Join(e.ws, ".prompt-2"))
	if !strings.Contains(string(prompt), "connecting with "+secret) {
		t.Errorf("redact_secrets=false still redacted:\n%s", prompt)
	}
}

// queryDB reads one value from the daemon's database, read-only.
func queryDB(e *env, query string, dest any) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "loopd.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRow(query).Scan(dest)
}
