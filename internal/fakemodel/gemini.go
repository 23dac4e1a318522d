package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// geminiRequest declares what the fake reads of a generateContent request.
type geminiRequest struct {
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request, body, keep []byte) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1beta/models/")
	model, method, _ := strings.Cut(rest, ":")
	if method == "countTokens" {
		s.countTokens(w, body, "gemini", r.URL.Path)
		return
	}
	var req geminiRequest
	_ = json.Unmarshal(body, &req)
	rec := Request{API: "gemini", Path: r.URL.Path, Model: model, Body: keep}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, f.Name)
		}
	}
	rec.Side = len(rec.Tools) == 0
	t, idx := s.take(&rec)
	if t.Model != "" {
		model = t.Model
	}

	if t.Status != 0 {
		s.setStatus(idx, t.Status)
		status, msg := t.ErrorType, t.Message
		if status == "" {
			status = map[int]string{429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 529: "UNAVAILABLE"}[t.Status]
			if status == "" {
				status = "UNKNOWN"
			}
		}
		delay := max(time.Until(t.ResetsAt).Seconds(), 0)
		if msg == "" {
			msg = defaultMessage(t.Status)
			if !t.ResetsAt.IsZero() {
				// Google's own words for a quota with a retry delay.
				msg = fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. Please retry in %.1fs.", delay)
			}
		}
		e := map[string]any{"code": t.Status, "message": msg, "status": status}
		if !t.ResetsAt.IsZero() {
			e["details"] = []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
					"violations": []any{map[string]any{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
						"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%.1fs", delay)},
			}
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

	// usageMetadata has no cache-write counter: bill what it reports.
	u := t.Usage
	u.CacheWrite, u.CacheWrite1h = 0, 0
	usage := map[string]any{
		"promptTokenCount":     u.Input + u.CacheRead,
		"candidatesTokenCount": u.Output,
		"totalTokenCount":      u.Input + u.CacheRead + u.Output + u.Reasoning,
	}
	if u.CacheRead > 0 {
		usage["cachedContentTokenCount"] = u.CacheRead
	}
	if u.Reasoning > 0 {
		usage["thoughtsTokenCount"] = u.Reasoning
	}
	chunk := func(parts []any, finish string, withUsage bool) map[string]any {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		m := map[string]any{"candidates": []any{c}, "modelVersion": model, "responseId": fmt.Sprintf("fake%06d", idx)}
		if withUsage {
			m["usageMetadata"] = usage
		}
		return m
	}

	stream := method == "streamGenerateContent"
	if !stream {
		// A non-streamed call (the CLI's own side checks): one JSON answer.
		text := t.Text
		if text == "" {
			text = "OK"
		}
		s.bill(idx, u)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(chunk([]any{map[string]any{"text": text}}, "STOP", true))
		return
	}
	e := newSSE(w)
	parts := words(t.Text)
	for i, part := range parts {
		last := i == len(parts)-1 && t.Tool == ""
		if last && !t.Cut {
			break // the last text part goes with the finish reason below
		}
		e.event("", chunk([]any{map[string]any{"text": part}}, "", false))
		if t.Cut {
			e.cut(t.CutHow)
			return
		}
	}
	if t.Cut {
		e.cut(t.CutHow)
		return
	}
	var final []any
	if t.Tool == "" && len(parts) > 0 {
		final = append(final, map[string]any{"text": parts[len(parts)-1]})
	}
	if t.Tool != "" {
		final = append(final, map[string]any{"functionCall": map[string]any{
			"name": "run_shell_command",
			"args": map[string]any{"command": t.Tool, "description": "run a command"},
		}})
	}
	if len(final) == 0 {
		final = []any{map[string]any{"text": ""}}
	}
	s.bill(idx, u)
	e.event("", chunk(final, "STOP", true))
}
