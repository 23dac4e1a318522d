// Package dashboard is loopd's web dashboard (served on the optional TCP
// listener, `loopd --http`): the runs page, each run's page with its
// iteration ledger, charts and live log tail, and the login that
// `loopctl dashboard` opens.
//
// The pages are rendered on the server with html/template and updated live
// by server-sent events that carry re-rendered HTML fragments; a small
// vanilla script swaps them in and sends the buttons' requests to the JSON
// API under /v1/. There is no front-end build, no framework and no vendored
// library to keep patched: every byte the browser gets is embedded in the
// binary (go:embed) and allowed by a strict Content-Security-Policy
// (no inline script, no other origin), and the page works with no network.
//
// The package reads through Source, implemented by the daemon, and never
// changes a run itself: the buttons call the same API handlers as loopctl,
// so they give the same errors.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Step is a step with the agent's final message, which the wire Step
// leaves out.
type Step struct {
	api.Step
	FinalMessage string
}

// TaskRuns is what the runs page shows under a backlog's row: its task
// runs, oldest first (a retried task's earlier runs too), and how many of
// its tasks are done.
type TaskRuns struct {
	Runs        []TaskRun
	Tasks, Done int
}

// TaskRun is a task run with the title of its task: its goal is the whole
// task prompt, which begins with the backlog's goal.
type TaskRun struct {
	api.Run
	Title string
}

// RunFilter selects runs for the runs page.
type RunFilter struct {
	Status    api.RunStatus // "" = any
	Workspace string        // "" = any
	Limit     int
	// TopLevel leaves out task runs: the runs page shows them under their
	// backlog (TaskRuns), and Limit counts only the runs it lists.
	TopLevel bool
}

// Source is what the dashboard reads, implemented by the daemon. A run
// that does not exist, or an ambiguous prefix, is an *api.Error, so the
// page says what `loopctl status` would.
type Source interface {
	// Runs lists runs, newest first.
	Runs(ctx context.Context, f RunFilter) ([]api.Run, error)
	// Run resolves a run id (or unique prefix) and describes it.
	Run(ctx context.Context, ref string) (api.Run, error)
	// Steps lists a run's steps by seq, without final messages.
	Steps(ctx context.Context, runID string) ([]api.Step, error)
	// StepsBetween lists a run's steps with fromSeq ≤ seq ≤ toSeq, with
	// their final messages.
	StepsBetween(ctx context.Context, runID string, fromSeq, toSeq int) ([]Step, error)
	// LastStep is the run's newest step (nil before its first).
	LastStep(ctx context.Context, runID string) (*api.Step, error)
	// TaskRuns lists a backlog run's task runs, oldest first, with its
	// tasks' count.
	TaskRuns(ctx context.Context, backlogID string) (TaskRuns, error)
	// Tasks is a backlog run's tasks with their task runs' numbers, as
	// `loopctl tasks` lists them; a run that is not a backlog is an
	// *api.Error.
	Tasks(ctx context.Context, backlogID string) (api.BacklogTasks, error)
	// ChangedRuns lists the runs that have events after seq (each once)
	// and the newest seq read; at most limit events are read.
	ChangedRuns(ctx context.Context, after int64, limit int) ([]string, int64, error)
	// Seq is the newest committed event seq; Wait blocks until the event
	// log passes after (see events.Bus).
	Seq() int64
	Wait(ctx context.Context, after int64) (int64, error)
}

// Options configure a Server.
type Options struct {
	Source Source
	Auth   *Auth
	Logger *zap.Logger
	// Closing, when closed, ends every live stream (daemon shutdown).
	Closing <-chan struct{}
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Server serves the dashboard's pages, streams and assets.
type Server struct {
	src     Source
	auth    *Auth
	log     *zap.Logger
	closing <-chan struct{}
	now     func() time.Time
	tmpl    *template.Template
	assets  http.Handler
	// logRefusal logs a refused login (LogRefusalsWith).
	logRefusal func(msg string, fields ...zap.Field)
}

// New builds a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Auth == nil {
		opts.Auth = NewAuth(opts.Now, 0)
	}
	sub, _ := fs.Sub(assetFS, "assets")
	s := &Server{src: opts.Source, auth: opts.Auth, log: opts.Logger, closing: opts.Closing, now: opts.Now,
		assets: http.StripPrefix("/assets/", http.FileServerFS(sub))}
	s.tmpl = template.Must(template.New("").Funcs(s.funcs()).ParseFS(templateFS, "templates/*.html"))
	s.logRefusal = func(msg string, fields ...zap.Field) { s.log.Debug(msg, fields...) }
	return s
}

// LogRefusalsWith makes f log each refused login, in place of a debug
// line: the daemon passes its rate-limited refusal log, since anyone on
// the machine can knock on /login as fast as they like. Call it before
// serving.
func (s *Server) LogRefusalsWith(f func(msg string, fields ...zap.Field)) { s.logRefusal = f }

// Auth is the server's login codes and sessions.
func (s *Server) Auth() *Auth { return s.auth }

// Register adds the dashboard's routes to mux. The JSON API stays under
// /v1/; the dashboard owns everything else it registers here.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.handleRuns)
	mux.HandleFunc("GET "+LoginPath, s.handleLogin)
	mux.HandleFunc("GET /runs/{id}", s.handleRun)
	mux.HandleFunc("GET /live/runs", s.streamRuns)
	mux.HandleFunc("GET /live/runs/{id}", s.streamRun)
	mux.HandleFunc("GET /live/runs/{id}/log", s.streamLog)
	mux.HandleFunc("GET /assets/", s.handleAsset)
	mux.HandleFunc("GET "+FaviconPath, handleFavicon)
}

// FaviconPath is where browsers look for a site's icon by themselves,
// after every page, the login and refusal pages included.
const FaviconPath = "/favicon.ico"

// handleFavicon answers a browser's own icon request with nothing (the
// dashboard has no icon), cached for a day: refused, it would be logged as
// a refused request after every login.
func handleFavicon(w http.ResponseWriter, _ *http.Request) {
	setSecurityHeaders(w)
	w.Header().Set("Cache-Control", "private, max-age=86400")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleAsset(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w)
	// Assets change only with the binary; a short cache keeps a reload
	// cheap without pinning an old script after an upgrade.
	w.Header().Set("Cache-Control", "private, max-age=300")
	s.assets.ServeHTTP(w, r)
}

// setSecurityHeaders forbids everything the dashboard does not do: other
// origins, inline script, framing (the buttons must not be clickjacked),
// content sniffing and leaking URLs in the Referer.
func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// render executes a page template into a buffer first, so a template error
// is a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("render page", zap.String("template", name), zap.String("path", r.URL.Path), zap.Error(err))
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	setSecurityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment renders a named template to a string, for a live update.
func (s *Server) fragment(name string, data any) (string, error) {
	var buf bytes.Buffer
	err := s.tmpl.ExecuteTemplate(&buf, name, data)
	return buf.String(), err
}
