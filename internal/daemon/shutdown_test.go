package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// A request whose work fails while the daemon shuts down (its context
// canceled, the database closed under it) is answered shutting_down
// (loopctl exit 69: run it again), not internal (70); errors that say
// something about the request itself keep their code.
func TestFailWhileShuttingDown(t *testing.T) {
	tests := []struct {
		name    string
		closing bool
		err     error
		status  int
		code    api.ErrorCode
	}{
		{"a failure while serving", false, errors.New("sql: statement is closed"), http.StatusInternalServerError, api.CodeInternal},
		{"the database closed by the shutdown", true, errors.New("list runs: sql: statement is closed"), http.StatusServiceUnavailable, api.CodeShutdown},
		{"work canceled by the shutdown", true, fmt.Errorf("land: %w", context.Canceled), http.StatusServiceUnavailable, api.CodeShutdown},
		{"no such run, while shutting down", true, fmt.Errorf("run x: %w", storage.ErrNotFound), http.StatusNotFound, api.CodeNotFound},
		{"a bad request, while shutting down", true, api.Errorf(api.CodeBadRequest, "bad"), http.StatusBadRequest, api.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Daemon{log: zap.NewNop(), closing: make(chan struct{})}
			if tt.closing {
				close(d.closing)
			}
			w := httptest.NewRecorder()
			d.fail(w, httptest.NewRequest(http.MethodGet, "/v1/runs", nil), tt.err)
			var body struct{ Error api.Error }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.status || body.Error.Code != tt.code {
				t.Fatalf("answer %d %s (%q), want %d %s", w.Code, body.Error.Code, body.Error.Message, tt.status, tt.code)
			}
		})
	}
}
