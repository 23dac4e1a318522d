package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrorCode classifies an API error; loopctl maps it to an exit code.
type ErrorCode string

const (
	CodeBadRequest ErrorCode = "bad_request" // malformed request or invalid input (config, conditions, paths)
	CodeNotFound   ErrorCode = "not_found"   // no such run or step
	CodeAmbiguous  ErrorCode = "ambiguous"   // a run id prefix matches several runs
	CodeConflict   ErrorCode = "conflict"    // the run is not in a state that allows the request
	CodeTooLarge   ErrorCode = "too_large"   // the request body exceeds the limit
	CodeForbidden  ErrorCode = "forbidden"   // the peer is not the daemon's owner
	CodeInternal   ErrorCode = "internal"    // a daemon-side failure
	CodeShutdown   ErrorCode = "shutting_down"
	// CodeUnavailable: the daemon cannot record anything right now (its
	// disk is full or read-only); it recovers by itself.
	CodeUnavailable ErrorCode = "storage_unavailable"
)

// Error is the body of every non-2xx response: {"error": {...}}.
type Error struct {
	Status  int       `json:"-"`
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Details lists every individual problem when there are several (for
	// example each bad config key), already formatted for a human.
	Details []string `json:"details,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	if len(e.Details) == 0 {
		return e.Message
	}
	return e.Message + ":\n  " + strings.Join(e.Details, "\n  ")
}

// Errorf builds an Error with the HTTP status that fits code.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Status: code.HTTPStatus(), Code: code, Message: fmt.Sprintf(format, args...)}
}

// HTTPStatus is the response status used for code.
func (c ErrorCode) HTTPStatus() int {
	switch c {
	case CodeBadRequest, CodeAmbiguous:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeForbidden:
		return http.StatusForbidden
	case CodeShutdown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code ErrorCode) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

type errorBody struct {
	Error *Error `json:"error"`
}
