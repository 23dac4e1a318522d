package transcript

import "regexp"

// The model API's trouble, in the agents' own words, as captured from the
// real CLIs against a failing API (testdata/*-<scenario>.jsonl):
//
//	API Error: 529 Overloaded. This is a server-side issue, …     (Claude Code)
//	API Error: 500 Internal server error. …
//	API Error: Request rejected (429) · Rate limited
//	API Error: Connection to the API was lost (ECONNRESET). …
//	unexpected status 529 <unknown status code>: Overloaded, url: …  (Codex)
//	exceeded retry limit, last status: 429 Too Many Requests
//	We’re currently experiencing high demand, which may cause temporary errors.
//	stream disconnected before completion: …
//	Reconnecting... 2/5 (stream disconnected before completion: …)
//	[API Error: {"error":{"code":529,"message":"Overloaded",…}}]      (Gemini CLI)
//	[API Error: Rate limited]
//	[API Error: terminated]
//	[API Error: Incomplete JSON segment at the end]
//	Model stream ended without a finish reason.
//
// The last two are a response that ended properly but early, as a proxy
// between the CLI and the API ends it when its upstream fails: cut in the
// middle of a chunk, or before the chunk with the finish reason. (Gemini
// CLI accepts the latter after a tool call and reports success.)
//
// A usage limit with a reset time is not trouble but a limit (checked
// first); a 4xx other than 408 and 429 (a bad key, a bad request) is the
// agent's or the user's problem and fails the step as usual.
var apiTroubleRE = regexp.MustCompile(`(?i)` +
	`api error:?\s*(?:5\d\d|529)\b` +
	`|request rejected \((?:429|5\d\d)\)` +
	`|connection to the api was lost` +
	`|unexpected status (?:408|429|5\d\d)\b` +
	`|exceeded retry limit, last status: (?:408|429|5\d\d)\b` +
	`|currently experiencing high demand` +
	`|stream disconnected before completion` +
	`|error sending request` +
	`|^reconnecting\b` +
	`|"code"\s*:\s*(?:408|429|5\d\d)\b` +
	`|\[api error: (?:rate limited|terminated|fetch failed|overloaded|service unavailable|internal error)` +
	`|resource has been exhausted` +
	`|incomplete json segment at the end|model stream ended without a finish reason` +
	`|\b(?:ECONNRESET|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ENOTFOUND|socket hang up)\b` +
	`|\boverloaded(?:_error)?\b` +
	`|\b(?:too many requests|rate_limit_exceeded|server_error|service unavailable|bad gateway|gateway time-?out)\b`)

// isAPITroubleText reports whether an agent's error says the model API
// failed (overloaded, 5xx, 429 without a usage-limit reset, a lost or cut
// connection), rather than the agent or its task.
func isAPITroubleText(s string) bool { return apiTroubleRE.MatchString(s) }

var reconnectRE = regexp.MustCompile(`(?i)^\s*reconnecting\b`)

// isReconnectNotice reports Codex's "Reconnecting... n/m (…)" notice, which
// it prints while its connection to the API fails.
func isReconnectNotice(s string) bool { return reconnectRE.MatchString(s) }

// quotaRE matches Gemini's quota errors (a 429 whose RetryInfo says when
// to come back, or a daily quota): usage limits, not outages.
var quotaRE = regexp.MustCompile(`(?i)exhausted your (?:daily )?quota|exceeded your current quota|quota exceeded`)

func isQuotaText(s string) bool { return quotaRE.MatchString(s) }
