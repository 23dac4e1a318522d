// Package fakemodel is a scripted fake of the model APIs that the real agent
// CLIs talk to, for tests that run Claude Code, Codex and Gemini CLI offline.
// One [Server] (an httptest server on 127.0.0.1) answers all three wire
// protocols:
//
//   - Anthropic Messages, streamed: POST /v1/messages (SSE message_start,
//     content_block_*, message_delta with the final usage, message_stop) and
//     POST /v1/messages/count_tokens. Claude Code: ANTHROPIC_BASE_URL=URL().
//   - OpenAI Responses, streamed: POST /v1/responses (SSE response.created,
//     response.output_item.*, response.completed with usage). Codex:
//     base_url = URL()+"/v1" in its model provider table.
//   - Gemini: POST /v1beta/models/<model>:streamGenerateContent?alt=sse
//     (chunks of GenerateContentResponse, the last with usageMetadata), and
//     :generateContent / :countTokens. Gemini CLI: GOOGLE_GEMINI_BASE_URL=URL().
//
// A test scripts the model's turns: every request of the agent's own loop
// (a request that offers tools) takes the next [Turn] from the queue, in
// order, whatever the protocol. A Turn is a text answer, a shell tool call
// that the CLI really executes (Claude's Bash, Codex's exec_command, Gemini's
// run_shell_command), an HTTP error (429 with or without a usage-limit reset,
// 500, 529 overloaded), a stall or a cut stream. When the queue is empty the
// server answers with [Server.Default] (a short text), so an agent never
// hangs on a test that scripted too few turns. Side requests (Claude Code's
// title generation and the like: no tools offered) never take a turn: they
// get a short text answer with [SideUsage].
//
// The server records what it billed: every response that sent its final
// usage counts (see [Turn.Usage] for the protocol mapping), side requests
// included, so a test compares loopd's recorded usage with [Server.Billed]
// to the token:
//
//	srv := fakemodel.New(t)
//	srv.Push(fakemodel.Turn{Tool: "echo hi > out.txt", Usage: fakemodel.Usage{Input: 100, Output: 20}},
//		fakemodel.Turn{Text: "done\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 120, Output: 30}})
//	// run the CLI with its base URL pointing at srv.URL() …
//	if got, want := recorded, srv.Billed(); got != want { … }
//
// [Server.Requests] lists every request (path, whether it took a turn, the
// status answered, the usage billed) for assertions and for debugging a CLI
// that does not do what a test expects.
package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Usage is what one response bills, in the fake's own terms; each protocol
// reports it in its own shape:
//
//   - Anthropic: input_tokens = Input, cache_read_input_tokens = CacheRead,
//     cache_creation_input_tokens = CacheWrite + CacheWrite1h (split in
//     cache_creation.ephemeral_5m/1h_input_tokens), output_tokens = Output +
//     Reasoning.
//   - OpenAI: input_tokens = Input + CacheRead (cached_tokens = CacheRead),
//     output_tokens = Output + Reasoning (reasoning_tokens = Reasoning).
//   - Gemini: promptTokenCount = Input + CacheRead (cachedContentTokenCount =
//     CacheRead), candidatesTokenCount = Output, thoughtsTokenCount =
//     Reasoning.
//
// So whatever the protocol, billed output is Output + Reasoning and billed
// fresh input is Input. OpenAI and Gemini usage has no cache-write counter:
// their responses bill CacheWrite and CacheWrite1h as zero, whatever the turn
// said, so [Server.Billed] is always what the wire reported.
type Usage struct {
	Input        int64 `json:"input"`
	Output       int64 `json:"output"`
	CacheRead    int64 `json:"cache_read"`
	CacheWrite   int64 `json:"cache_write"`
	CacheWrite1h int64 `json:"cache_write_1h"`
	Reasoning    int64 `json:"reasoning"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input: u.Input + v.Input, Output: u.Output + v.Output,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		CacheWrite1h: u.CacheWrite1h + v.CacheWrite1h, Reasoning: u.Reasoning + v.Reasoning,
	}
}

// TotalOutput is the billed output: visible output plus reasoning.
func (u Usage) TotalOutput() int64 { return u.Output + u.Reasoning }

// Turn is one scripted model response. Exactly one kind applies, checked in
// this order: Status (an HTTP error), Stall, otherwise a streamed answer with
// Text and/or Tool, which Cut may break off before its end.
type Turn struct {
	// Text is the assistant's text.
	Text string
	// Tool, when set, is a shell command the model asks to run, after Text.
	Tool string
	// Background asks Claude Code to run Tool in the background
	// (run_in_background): its turn may end while the command still runs.
	Background bool
	// Usage is what the response bills when its final usage is sent.
	Usage Usage
	// Model overrides the model name the response reports (default: the
	// model of the request).
	Model string

	// Status, when non-zero, answers with this HTTP status and an error body
	// in the protocol's shape instead of a stream; nothing is billed.
	Status int
	// ErrorType is the error's type or code (Anthropic error.type such as
	// "overloaded_error", OpenAI error.type such as "usage_limit_reached",
	// Gemini error.status such as "RESOURCE_EXHAUSTED"); a default fitting
	// Status when empty.
	ErrorType string
	// Message is the error's message; a default fitting Status when empty.
	Message string
	// ResetsAt, when set on a 429, is a usage-limit reset: Anthropic
	// anthropic-ratelimit-unified-status: rejected and
	// anthropic-ratelimit-unified-reset headers; OpenAI usage_limit_reached
	// with resets_at; Gemini a RetryInfo retryDelay until then.
	ResetsAt time.Time
	// Header adds response headers (e.g. retry-after, x-should-retry).
	Header map[string]string

	// Stall keeps the request open without answering until the client goes
	// away or the server closes: a model that never responds.
	Stall bool
	// Cut ends the stream after its first events (before any final usage
	// and, for Gemini, before any finish reason), the way CutHow says.
	// Nothing is billed.
	Cut bool
	// CutHow is how a Cut stream ends: the connection dropped (the
	// default), or the response ended properly with its answer, or its
	// last event, unfinished, as a proxy in between does.
	CutHow Truncation
}

// Truncation is how a [Turn.Cut] stream ends.
type Truncation int

const (
	// CutConnection drops the connection mid-answer: a reset network.
	CutConnection Truncation = iota
	// CutEnd ends the HTTP response properly after the first events: the
	// transfer is complete but the answer is not (no final event, no
	// usage, no finish reason), as when a proxy loses its upstream and
	// closes the response it was forwarding.
	CutEnd
	// CutMidEvent ends the HTTP response properly in the middle of an
	// event's JSON, as when a proxy forwards part of a chunk and closes.
	CutMidEvent
)

// SideUsage is what a side request (no tools offered) bills.
var SideUsage = Usage{Input: 12, Output: 3}

// Request is one request the server received.
type Request struct {
	// API is "anthropic", "openai" or "gemini"; Path the URL path.
	API, Path string
	// Model is the model the request named.
	Model string
	// Side reports a request that offered no tools: it took no turn.
	Side bool
	// Turn is the index of the turn it took in the order of Push (-1 for
	// side requests and for count_tokens; -2 when it got Default).
	Turn int
	// Status is the HTTP status answered.
	Status int
	// Billed is the usage billed for it (zero when none was).
	Billed Usage
	// Tools lists the names of the tools the request offered.
	Tools []string
	// Body is the raw request body (at most 1 MiB kept).
	Body []byte
}

// Server is the fake model API. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server
	tb  testing.TB

	mu      sync.Mutex
	queue   []Turn
	next    int // index in order of Push of the next queued turn
	def     Turn
	reqs    []Request
	billed  Usage
	stalled chan struct{} // closed by Close: releases stalls
	seq     int
}

// New starts a server on 127.0.0.1 that closes when the test ends.
func New(tb testing.TB) *Server {
	s := &Server{
		tb:      tb,
		def:     Turn{Text: "OK", Usage: Usage{Input: 10, Output: 2}},
		stalled: make(chan struct{}),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT (no trailing slash).
func (s *Server) URL() string { return s.srv.URL }

// Close releases stalled requests and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stalled:
	default:
		close(s.stalled)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push appends turns to the queue.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, turns...)
}

// SetDefault sets the turn answered when the queue is empty (for example a
// 529 for an outage that lasts until the test pushes a recovery).
func (s *Server) SetDefault(t Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = t
}

// Pending is the number of queued turns not taken yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Billed is the sum of every response's billed usage so far.
func (s *Server) Billed() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billed
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Summary describes every request in one line each, for test failure logs.
func (s *Server) Summary() string {
	var b strings.Builder
	for i, r := range s.Requests() {
		fmt.Fprintf(&b, "%d: %s %s model=%s side=%v turn=%d status=%d billed=%+v tools=%v\n",
			i, r.API, r.Path, r.Model, r.Side, r.Turn, r.Status, r.Billed, r.Tools)
	}
	return b.String()
}

// take records a request and returns the turn it gets.
func (s *Server) take(r *Request) (Turn, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := len(s.reqs)
	s.seq++
	if r.Side {
		r.Turn = -1
		s.reqs = append(s.reqs, *r)
		return Turn{Text: "Fake title", Usage: SideUsage}, idx
	}
	var t Turn
	if len(s.queue) > 0 {
		t, s.queue = s.queue[0], s.queue[1:]
		r.Turn = s.next
		s.next++
	} else {
		t = s.def
		r.Turn = -2
	}
	s.reqs = append(s.reqs, *r)
	return t, idx
}

// bill records that request idx sent its final usage.
func (s *Server) bill(idx int, u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[idx].Billed = s.reqs[idx].Billed.Add(u)
	s.billed = s.billed.Add(u)
}

func (s *Server) setStatus(idx, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[idx].Status = status
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	keep := body
	if len(keep) > 1<<20 {
		keep = keep[:1<<20]
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		s.countTokens(w, body, "anthropic", path)
	case r.Method == http.MethodPost && path == "/v1/messages":
		s.anthropic(w, r, body, keep)
	case r.Method == http.MethodPost && path == "/v1/responses":
		s.openAI(w, r, body, keep)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/"):
		s.gemini(w, r, body, keep)
	default:
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Path: r.Method + " " + path, Turn: -1, Status: http.StatusNotFound, Body: keep})
		s.mu.Unlock()
		http.NotFound(w, r)
	}
}

// countTokens answers a token-counting request with a rough count; it is
// not billed (the real APIs do not bill it either).
func (s *Server) countTokens(w http.ResponseWriter, body []byte, api, path string) {
	n := max(1, len(body)/4)
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{API: api, Path: path, Turn: -1, Status: 200})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if api == "gemini" {
		fmt.Fprintf(w, `{"totalTokens":%d}`, n)
		return
	}
	fmt.Fprintf(w, `{"input_tokens":%d}`, n)
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w    http.ResponseWriter
	f    http.Flusher
	last []byte // the data of the last event written
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name "" writes a data-only event.
func (e *sse) event(name string, data any) {
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	j, _ := json.Marshal(data)
	e.last = j
	fmt.Fprintf(&b, "data: %s\n\n", j)
	_, _ = e.w.Write(b.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

// cut breaks the stream off the way how says. For CutEnd and CutMidEvent
// the handler returns after it, which ends the response properly (the
// last chunk of a chunked body): nothing on the wire says it is cut.
func (e *sse) cut(how Truncation) {
	switch how {
	case CutEnd:
	case CutMidEvent:
		// Half of the last event again: a line that never ends.
		_, _ = fmt.Fprintf(e.w, "data: %s", e.last[:len(e.last)/2])
	default:
		cut(e.w)
		return
	}
	if e.f != nil {
		e.f.Flush()
	}
}

// cut drops the connection without ending the response properly, as a
// dropped network would.
func cut(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// stall answers 200 with a stream's headers and nothing after them, then
// blocks until the client goes away or the server closes: a stalled model
// API for every wire format.
func (s *Server) stall(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-s.stalled:
	}
}

// writeError answers with an HTTP error whose body is already encoded.
func writeError(w http.ResponseWriter, t Turn, status int, body any) {
	for k, v := range t.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func defaultMessage(status int) string {
	switch status {
	case 429:
		return "Rate limited"
	case 529:
		return "Overloaded"
	case 500:
		return "Internal server error"
	case 503:
		return "Service unavailable"
	}
	return http.StatusText(status)
}

// words splits text into a few deltas, as a real stream would.
func words(text string) []string {
	if text == "" {
		return nil
	}
	var out []string
	for len(text) > 0 {
		n := min(len(text), 16)
		// Do not split a multi-byte character.
		for n < len(text) && text[n]&0xC0 == 0x80 {
			n++
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}
