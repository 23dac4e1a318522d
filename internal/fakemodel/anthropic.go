package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// anthropicRequest declares what the fake reads of a Messages request.
type anthropicRequest struct {
	Model string `json:"model"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request, body, keep []byte) {
	var req anthropicRequest
	_ = json.Unmarshal(body, &req)
	rec := Request{API: "anthropic", Path: r.URL.Path, Model: req.Model, Side: len(req.Tools) == 0, Body: keep}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	t, idx := s.take(&rec)
	model := req.Model
	if t.Model != "" {
		model = t.Model
	}

	if t.Status != 0 {
		s.setStatus(idx, t.Status)
		typ, msg := t.ErrorType, t.Message
		if typ == "" {
			typ = map[int]string{429: "rate_limit_error", 529: "overloaded_error", 500: "api_error",
				503: "api_error", 400: "invalid_request_error", 401: "authentication_error"}[t.Status]
			if typ == "" {
				typ = "api_error"
			}
		}
		if msg == "" {
			msg = defaultMessage(t.Status)
		}
		if t.Status == 429 && !t.ResetsAt.IsZero() {
			// A subscription's usage limit (Claude Code reads the unified
			// headers; the body is an ordinary rate_limit_error).
			if t.Header == nil {
				t.Header = map[string]string{}
			}
			t.Header["anthropic-ratelimit-unified-status"] = "rejected"
			t.Header["anthropic-ratelimit-unified-reset"] = strconv.FormatInt(t.ResetsAt.Unix(), 10)
			if _, ok := t.Header["anthropic-ratelimit-unified-representative-claim"]; !ok {
				t.Header["anthropic-ratelimit-unified-representative-claim"] = "five_hour"
			}
		}
		writeError(w, t, t.Status, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": typ, "message": msg},
		})
		return
	}
	s.setStatus(idx, http.StatusOK)
	for k, v := range t.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%d", idx))
	if t.Stall {
		s.stall(w, r)
		return
	}

	u := t.Usage
	id := fmt.Sprintf("msg_fake%06d", idx)
	e := newSSE(w)
	usage := func(output int64) map[string]any {
		return map[string]any{
			"input_tokens":                u.Input,
			"cache_creation_input_tokens": u.CacheWrite + u.CacheWrite1h,
			"cache_read_input_tokens":     u.CacheRead,
			"cache_creation": map[string]any{
				"ephemeral_5m_input_tokens": u.CacheWrite,
				"ephemeral_1h_input_tokens": u.CacheWrite1h,
			},
			"output_tokens": output,
			"service_tier":  "standard",
		}
	}
	e.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": usage(min(1, u.TotalOutput())),
		},
	})
	block := 0
	if t.Text != "" {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for i, part := range words(t.Text) {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
				"delta": map[string]any{"type": "text_delta", "text": part}})
			if t.Cut && i == 0 {
				e.cut(t.CutHow)
				return
			}
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		block++
	}
	if t.Cut {
		e.cut(t.CutHow)
		return
	}
	stop := "end_turn"
	if t.Tool != "" {
		stop = "tool_use"
		args := map[string]any{"command": t.Tool, "description": "run a command"}
		if t.Background {
			args["run_in_background"] = true
		}
		input, _ := json.Marshal(args)
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%06d", idx),
				"name": "Bash", "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
	}
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": usage(u.TotalOutput()),
	})
	s.bill(idx, u)
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// unixReset is a helper for tests that want a reset a little in the future,
// rounded to the second as the real header is.
func unixReset(d time.Duration) time.Time { return time.Now().Add(d).Truncate(time.Second) }

// ResetIn returns a reset time d from now, to the second, for Turn.ResetsAt.
func ResetIn(d time.Duration) time.Time { return unixReset(d) }
