package backlog

import (
	"errors"
	"testing"
)

func TestRefusals(t *testing.T) {
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(tt.file, []byte(tt.input))
			if err == nil {
				t.Fatalf("Parse accepted it: %s", dump(l.Tasks))
			}
			if l != nil {
				t.Errorf("Parse returned a list with its error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got  %s\n want %s", got, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != tt.file {
				t.Errorf("error is not an *Error for %s: %#v", tt.file, err)
			}
		})
	}
}
