package api

import "testing"

func TestEventSummary(t *testing.T) {
	for _, tc := range []struct {
		typ, payload, want string
	}{
		{"STEP_STARTED", `{"seq":3,"phase":"verification","iteration":2}`, "#3 verification, iteration 2"},
		{"STEP_FINISHED", `{"seq":3,"phase":"verification","status":"FAILED","error":"exit status 1"}`, "#3 verification FAILED: exit status 1"},
		{"STEP_FINISHED", `{"seq":4,"phase":"implementation","status":"SUCCEEDED","error":null}`, "#4 implementation SUCCEEDED"},
		{"STEP_ADOPTED", `{"seq":5,"phase":"implementation","pid":4242}`, "#5 implementation, pid 4242"},
		{"CONDITION_PROGRESSED", `{"description":"max_cost 25.00","progress":0.5}`, "max_cost 25.00: 50%"},
		{"CONDITION_PROGRESSED", `{"description":"max_cost 25.00","unmeasurable":true,"reason":"no price for model x"}`, "max_cost 25.00: no price for model x"},
		{"RUN_ABORTED", `{"reason":"max_iterations:5","description":"Reached 5 iterations"}`, "max_iterations:5 — Reached 5 iterations"},
		{"RUN_WAITING", `{"until":"2026-11-21T16:00:00Z"}`, "until 2026-11-21T16:00:00Z"},
		{"NOTIFICATION_SENT", `{"channel":"webhook","event":"RUN_FAILED","attempt":2}`, "webhook of RUN_FAILED, attempt 2"},
		{"NOTIFICATION_FAILED", `{"channel":"webhook","event":"RUN_FAILED","attempt":1,"error":"webhook answered 503","final":false,"retry_at":"2026-11-21T16:00:02.000Z"}`,
			"webhook of RUN_FAILED, attempt 1: webhook answered 503; retried at 2026-11-21T16:00:02.000Z"},
		{"NOTIFICATION_FAILED", `{"channel":"command","event":"RUN_COMPLETED","attempt":1,"error":"exit status 3","final":true}`,
			"command of RUN_COMPLETED, attempt 1: exit status 3"},
		{"RUN_CREATED", `{"goal":"g"}`, ""},
		{"STEP_STARTED", `not json`, ""},
		{"STEP_STARTED", `{}`, ""},
	} {
		if got := (Event{Type: tc.typ, Payload: []byte(tc.payload)}).Summary(); got != tc.want {
			t.Errorf("%s %s: Summary() = %q, want %q", tc.typ, tc.payload, got, tc.want)
		}
	}
}
