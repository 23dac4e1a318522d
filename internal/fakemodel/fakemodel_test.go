package fakemodel

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, string, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestProtocols(t *testing.T) {
	u := Usage{Input: 100, Output: 20, CacheRead: 50, CacheWrite: 30, Reasoning: 5}
	tests := []struct {
		name, path, body string
		want             []string // substrings of the answer
		billed           Usage
	}{
		{"anthropic", "/v1/messages", `{"model":"m","tools":[{"name":"Bash"}]}`,
			[]string{"event: message_start", `"name":"Bash"`, `"partial_json":"{\"command\":\"ls\"`, `"output_tokens":25`, `"cache_creation_input_tokens":30`, "event: message_stop"}, u},
		{"openai", "/v1/responses", `{"model":"m","tools":[{"type":"function","name":"exec_command"}]}`,
			[]string{"response.created", `"name":"exec_command"`, `"input_tokens":150`, `"cached_tokens":50`, `"output_tokens":25`, `"reasoning_tokens":5`},
			Usage{Input: 100, Output: 20, CacheRead: 50, Reasoning: 5}},
		{"gemini", "/v1beta/models/g:streamGenerateContent", `{"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`,
			[]string{`"functionCall":{"args":{"command":"ls"`, `"promptTokenCount":150`, `"candidatesTokenCount":20`, `"thoughtsTokenCount":5`, `"finishReason":"STOP"`},
			Usage{Input: 100, Output: 20, CacheRead: 50, Reasoning: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.Push(Turn{Text: "hi", Tool: "ls", Usage: u})
			_, body, err := post(t, s.URL()+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("answer lacks %s:\n%s", w, body)
				}
			}
			if got := s.Billed(); got != tc.billed {
				t.Errorf("billed %+v, want %+v", got, tc.billed)
			}
			// A side request (no tools) takes no turn and is billed.
			s.Push(Turn{Text: "queued"})
			_, body, _ = post(t, s.URL()+tc.path, `{"model":"m"}`)
			if !strings.Contains(body, "Fake title") {
				t.Errorf("side answer: %s", body)
			}
			if s.Pending() != 1 {
				t.Errorf("a side request took a turn")
			}
			if got, want := s.Billed(), tc.billed.Add(SideUsage); got != want {
				t.Errorf("billed after side request %+v, want %+v", got, want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	reset := time.Unix(1900000000, 0)
	tests := []struct {
		name, path string
		turn       Turn
		status     int
		want       []string
		header     [2]string
	}{
		{"anthropic 529", "/v1/messages", Turn{Status: 529}, 529, []string{`"overloaded_error"`, "Overloaded"}, [2]string{}},
		{"anthropic usage limit", "/v1/messages", Turn{Status: 429, ResetsAt: reset}, 429, []string{"rate_limit_error"},
			[2]string{"anthropic-ratelimit-unified-reset", "1900000000"}},
		{"openai usage limit", "/v1/responses", Turn{Status: 429, ResetsAt: reset}, 429, []string{`"usage_limit_reached"`, `"resets_at":1900000000`}, [2]string{}},
		{"openai plain 429", "/v1/responses", Turn{Status: 429}, 429, []string{`"rate_limit_exceeded"`}, [2]string{}},
		{"gemini 503", "/v1beta/models/g:streamGenerateContent", Turn{Status: 503}, 503, []string{`"UNAVAILABLE"`}, [2]string{}},
		{"gemini quota", "/v1beta/models/g:streamGenerateContent", Turn{Status: 429, ResetsAt: time.Now().Add(time.Hour)}, 429, []string{`google.rpc.RetryInfo","retryDelay":"3`}, [2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.Push(tc.turn)
			req := `{"tools":[{"name":"x"}]}`
			if strings.HasPrefix(tc.path, "/v1beta") {
				req = `{"tools":[{"functionDeclarations":[{"name":"x"}]}]}`
			}
			resp, body, err := post(t, s.URL()+tc.path, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s: %s", w, body)
				}
			}
			if tc.header[0] != "" && resp.Header.Get(tc.header[0]) != tc.header[1] {
				t.Errorf("header %s = %q, want %q", tc.header[0], resp.Header.Get(tc.header[0]), tc.header[1])
			}
			if s.Billed() != (Usage{}) {
				t.Errorf("an error was billed: %+v", s.Billed())
			}
		})
	}
}

func TestCutAndStall(t *testing.T) {
	s := New(t)
	s.Push(Turn{Text: "a long answer that is cut", Cut: true, Usage: Usage{Input: 5, Output: 5}})
	_, body, err := post(t, s.URL()+"/v1/responses", `{"tools":[{"name":"x"}]}`)
	if err == nil && strings.Contains(body, "response.completed") {
		t.Fatalf("cut stream completed: %s", body)
	}
	if s.Billed() != (Usage{}) {
		t.Errorf("a cut stream was billed: %+v", s.Billed())
	}

	s.Push(Turn{Stall: true})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = post(t, s.URL()+"/v1/messages", `{"tools":[{"name":"x"}]}`)
	}()
	// The stalled request is recorded as taken before the answer blocks.
	for s.Pending() != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("a stalled request was answered")
	case <-time.After(50 * time.Millisecond):
	}
	s.Close()
	<-done
}

// A stream cut by a proxy ends its response properly: the client reads it
// to its end without an error, and it lacks the final event (CutEnd) or
// ends inside one (CutMidEvent).
func TestCutByProxy(t *testing.T) {
	paths := map[string]string{"anthropic": "/v1/messages", "openai": "/v1/responses", "gemini": "/v1beta/models/g:streamGenerateContent"}
	final := map[string]string{"anthropic": "message_stop", "openai": "response.completed", "gemini": "finishReason"}
	for api, path := range paths {
		for _, how := range []Truncation{CutEnd, CutMidEvent} {
			s := New(t)
			s.Push(Turn{Text: "a long answer that is cut", Cut: true, CutHow: how, Usage: Usage{Input: 5, Output: 5}})
			_, body, err := post(t, s.URL()+path, `{"tools":[{"name":"x","functionDeclarations":[{"name":"x"}]}]}`)
			if err != nil {
				t.Fatalf("%s %d: the response did not end properly: %v", api, how, err)
			}
			if strings.Contains(body, final[api]) || s.Billed() != (Usage{}) {
				t.Errorf("%s %d: a cut stream completed (billed %+v): %s", api, how, s.Billed(), body)
			}
			if mid := !strings.HasSuffix(body, "\n\n"); mid != (how == CutMidEvent) {
				t.Errorf("%s %d: ends inside an event: %v, want %v: %q", api, how, mid, how == CutMidEvent, body)
			}
		}
	}
}

func TestDefaultTurn(t *testing.T) {
	s := New(t)
	s.SetDefault(Turn{Status: 500})
	resp, _, err := post(t, s.URL()+"/v1/messages", `{"tools":[{"name":"x"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 {
		t.Errorf("default turn answered %d", resp.StatusCode)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Turn != -2 || r[0].Status != 500 {
		t.Errorf("requests %+v", r)
	}
}
