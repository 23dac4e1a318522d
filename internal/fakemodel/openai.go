package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// openAIRequest declares what the fake reads of a Responses request.
type openAIRequest struct {
	Model string `json:"model"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request, body, keep []byte) {
	var req openAIRequest
	_ = json.Unmarshal(body, &req)
	rec := Request{API: "openai", Path: r.URL.Path, Model: req.Model, Side: len(req.Tools) == 0, Body: keep}
	for _, t := range req.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		rec.Tools = append(rec.Tools, name)
	}
	t, idx := s.take(&rec)
	model := req.Model
	if t.Model != "" {
		model = t.Model
	}

	if t.Status != 0 {
		s.setStatus(idx, t.Status)
		typ, msg := t.ErrorType, t.Message
		if t.Status == 429 && !t.ResetsAt.IsZero() && typ == "" {
			typ = "usage_limit_reached"
		}
		if typ == "" {
			typ = map[int]string{429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}[t.Status]
			if typ == "" {
				typ = "server_error"
			}
		}
		if msg == "" {
			msg = defaultMessage(t.Status)
			if typ == "usage_limit_reached" {
				msg = "The usage limit has been reached"
			}
		}
		e := map[string]any{"type": typ, "message": msg, "code": typ}
		if !t.ResetsAt.IsZero() {
			e["resets_at"] = t.ResetsAt.Unix()
			e["plan_type"] = "plus"
		}
		writeError(w, t, t.Status, map[string]any{"error": e})
		return
	}
	s.setStatus(idx, http.StatusOK)
	for k, v := range t.Header {
		w.Header().Set(k, v)
	}
	if t.Stall {
		s.stall(w, r)
		return
	}

	// The Responses usage has no cache-write counter: bill what it reports.
	u := t.Usage
	u.CacheWrite, u.CacheWrite1h = 0, 0
	respID := fmt.Sprintf("resp_fake%06d", idx)
	e := newSSE(w)
	e.event("response.created", map[string]any{"type": "response.created",
		"response": map[string]any{"id": respID, "model": model, "status": "in_progress"}})
	out := 0
	if t.Text != "" {
		msgID := fmt.Sprintf("msg_fake%06d", idx)
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": out,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}})
		for i, part := range words(t.Text) {
			e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta",
				"item_id": msgID, "output_index": out, "content_index": 0, "delta": part})
			if t.Cut && i == 0 {
				e.cut(t.CutHow)
				return
			}
		}
		e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": t.Text, "annotations": []any{}}}}})
		out++
	}
	if t.Cut {
		e.cut(t.CutHow)
		return
	}
	if t.Tool != "" {
		args, _ := json.Marshal(map[string]any{"cmd": t.Tool})
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%06d", idx),
			"call_id": fmt.Sprintf("call_fake%06d", idx), "name": "exec_command", "arguments": string(args),
			"status": "completed"}
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": out, "item": item})
		e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out, "item": item})
	}
	s.bill(idx, u)
	e.event("response.completed", map[string]any{"type": "response.completed",
		"response": map[string]any{
			"id": respID, "model": model, "status": "completed",
			"usage": map[string]any{
				"input_tokens":          u.Input + u.CacheRead,
				"input_tokens_details":  map[string]any{"cached_tokens": u.CacheRead},
				"output_tokens":         u.TotalOutput(),
				"output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
				"total_tokens":          u.Input + u.CacheRead + u.TotalOutput(),
			},
		}})
}
