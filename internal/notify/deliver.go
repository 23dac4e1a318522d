package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/procgroup"
)

// Channels of the outbox.
const (
	ChannelCommand = "command" // notify_command
	ChannelWebhook = "webhook" // notify_webhook
	ChannelDesktop = "desktop" // notify_desktop
)

// attemptError is a failed delivery; retry says whether another attempt
// may succeed (a webhook that answered 5xx or could not be reached).
type attemptError struct {
	msg   string
	retry bool
	code  int // the webhook's HTTP status, 0 if none
}

func (e *attemptError) Error() string { return e.msg }

// postWebhook POSTs the message as JSON. 2xx is delivered; 408, 425, 429,
// 5xx and transport errors are worth retrying; any other status is final
// (a wrong URL does not get better).
func postWebhook(ctx context.Context, client *http.Client, url string, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return &attemptError{msg: "encode: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &attemptError{msg: "request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "loopd/"+api.BuildVersion())
	resp, err := client.Do(req)
	if err != nil {
		// Never log the URL: a Slack or Discord webhook URL is a secret.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return &attemptError{msg: "post: " + err.Error(), retry: true}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout ||
		resp.StatusCode == http.StatusTooEarly || resp.StatusCode == http.StatusTooManyRequests
	msg := "webhook answered " + resp.Status
	if s := strings.TrimSpace(string(snippet)); s != "" {
		msg += ": " + oneLine(s)
	}
	return &attemptError{msg: msg, retry: retry, code: resp.StatusCode}
}

// commandEnv lists the LOOP_* variables of the notify command.
func commandEnv(m Message) []string {
	r := m.Run
	env := []string{
		"LOOP_RUN_ID=" + r.ID, "LOOP_RUN_NAME=" + r.Name, "LOOP_WORKSPACE=" + r.Workspace,
		"LOOP_EVENT=" + m.Event.Type, "LOOP_EVENT_SEQ=" + strconv.FormatInt(m.Event.Seq, 10),
		"LOOP_STATUS=" + string(m.Status), "LOOP_ITERATION=" + strconv.Itoa(r.Iteration),
		"LOOP_TITLE=" + m.Title, "LOOP_TEXT=" + m.Text,
	}
	var p struct {
		Reason      string `json:"reason"`
		Description string `json:"description"`
	}
	_ = json.Unmarshal(m.Event.Payload, &p)
	env = append(env, "LOOP_REASON="+p.Reason, "LOOP_DESCRIPTION="+p.Description)
	if code := m.Status.ExitCode(); code >= 0 {
		env = append(env, "LOOP_EXIT_CODE="+strconv.Itoa(code))
	}
	return env
}

// maxOutput bounds what a failing command's output adds to its event.
const maxOutput = 2048

// runCommand runs the notify command with sh -c in the run's workspace,
// the message JSON on stdin and the LOOP_* variables, in its own process
// group so a timeout kills all of it.
func runCommand(ctx context.Context, command string, timeout time.Duration, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return &attemptError{msg: "encode: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	if fi, err := os.Stat(m.Run.Workspace); err == nil && fi.IsDir() {
		cmd.Dir = m.Run.Workspace
	}
	cmd.Env = append(os.Environ(), commandEnv(m)...)
	cmd.Stdin = bytes.NewReader(body)
	out := &tailBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	procgroup.Set(cmd)
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() == context.DeadlineExceeded:
		return &attemptError{msg: fmt.Sprintf("notify command timed out after %s", timeout)}
	}
	msg := "notify command: " + err.Error()
	if s := strings.TrimSpace(out.String()); s != "" {
		msg += ": " + s
	}
	return &attemptError{msg: msg}
}

// desktopSession reports whether env (loopd's environment) reaches a
// desktop session's notification service, and why not.
func desktopSession(env []string) (bool, string) {
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	if get("DBUS_SESSION_BUS_ADDRESS") != "" || get("DISPLAY") != "" || get("WAYLAND_DISPLAY") != "" {
		return true, ""
	}
	if rt := get("XDG_RUNTIME_DIR"); rt != "" {
		if _, err := os.Stat(filepath.Join(rt, "bus")); err == nil {
			return true, ""
		}
	}
	return false, "no desktop session: loopd's environment has no DBUS_SESSION_BUS_ADDRESS, DISPLAY or WAYLAND_DISPLAY"
}

// notifySend shows the message with notify-send.
func notifySend(ctx context.Context, env []string, m Message) error {
	if ok, why := desktopSession(env); !ok {
		return &attemptError{msg: why}
	}
	bin, err := exec.LookPath("notify-send")
	if err != nil {
		return &attemptError{msg: "notify-send is not installed (Debian/Ubuntu: apt install libnotify-bin)"}
	}
	urgency := "normal"
	if m.Status == api.RunFailed || m.Status == api.RunAborted {
		urgency = "critical"
	}
	ctx, cancel := context.WithTimeout(ctx, DesktopTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--app-name=loopd", "--urgency="+urgency, "--", m.Title, m.Text)
	cmd.Env = env
	out := &tailBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return &attemptError{msg: "notify-send: " + err.Error() + " " + strings.TrimSpace(out.String())}
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return oneLine(string(t.b)) }

func oneLine(s string) string { return clip(strings.Join(strings.Fields(s), " "), maxOutput) }
