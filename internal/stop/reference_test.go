package stop

import (
	"bytes"
	"testing"
)

// Every condition type is documented with an example that is valid and
// round-trips through its JSON form, so the generated reference shows
// JSON a user can paste.
func TestReferenceIsComplete(t *testing.T) {
	docs := Reference()
	if len(docs) != len(Types()) {
		t.Fatalf("%d docs for %d types", len(docs), len(Types()))
	}
	for _, d := range docs {
		t.Run(string(d.Type), func(t *testing.T) {
			if d.Summary == "" || d.Example == nil {
				t.Fatalf("type %s has no summary or example in its descriptor", d.Type)
			}
			if d.Example.Type() != d.Type {
				t.Fatalf("example is a %s", d.Example.Type())
			}
			b, err := d.Example.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeSet([]byte(`{"conditions":[` + string(b) + `]}`))
			if err != nil {
				t.Fatalf("example %s does not decode: %v", b, err)
			}
			again, _ := back.Conditions[0].MarshalJSON()
			if !bytes.Equal(b, again) {
				t.Fatalf("example %s round-trips as %s", b, again)
			}
		})
	}
}
