package transcript

import "testing"

func TestHasPromise(t *testing.T) {
	tests := []struct {
		name    string
		message string
		promise string
		want    bool
	}{
		{name: "own last line", message: "All done.\n" + promise, promise: promise, want: true},
		{name: "the whole message", message: promise, promise: promise, want: true},
		{name: "trailing blanks and blank lines", message: "Done.\n\n  " + promise + " \t\n\n\n", promise: promise, want: true},
		{name: "CRLF line ends", message: "Done.\r\n" + promise + "\r\n", promise: promise, want: true},
		{name: "CR line ends", message: "Done.\r" + promise + "\r", promise: promise, want: true},
		{name: "promise argument with blanks", message: "Done.\n" + promise, promise: "  " + promise + "\n", want: true},
		{name: "custom promise", message: "shipped\nDONE", promise: "DONE", want: true},
		{name: "mentioned in prose", message: "I will print " + promise + " when finished.", promise: promise, want: false},
		{name: "followed by text on the same line", message: "Done.\n" + promise + " (almost)", promise: promise, want: false},
		{name: "followed by another line", message: promise + "\nOne more thing: the docs are stale.", promise: promise, want: false},
		{name: "inside a closed code fence", message: "Output:\n```\n" + promise + "\n```", promise: promise, want: false},
		{name: "after an unclosed fence, lines alone count", message: "```\n" + promise, promise: promise, want: true},
		{name: "trailing fence on the same line", message: promise + "```", promise: promise, want: false},
		{name: "markdown quote", message: "> " + promise, promise: promise, want: false},
		{name: "emphasis", message: "**" + promise + "**", promise: promise, want: false},
		{name: "case differs", message: "<promise>complete</promise>", promise: promise, want: false},
		{name: "empty message", message: "", promise: promise, want: false},
		{name: "empty promise never matches", message: "anything\n", promise: "  ", want: false},
		{name: "multi-line promise never matches", message: "a\nb", promise: "a\nb", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasPromise(tt.message, tt.promise); got != tt.want {
				t.Fatalf("HasPromise(%q, %q) = %v, want %v", tt.message, tt.promise, got, tt.want)
			}
		})
	}
}

func TestQuestion(t *testing.T) {
	tests := []struct {
		name, msg, want string
		ok              bool
	}{
		{"own line", "I looked at the schema.\n<question>Postgres or SQLite?</question>\n", "Postgres or SQLite?", true},
		{"only the question", "<question>Which port?</question>", "Which port?", true},
		{"spanning lines", "Two options.\n<question>\nKeep the old API?\nOr break it?\n</question>", "Keep the old API?\nOr break it?", true},
		{"trailing blank lines", "<question>Why?</question>\n\n  \n", "Why?", true},
		{"CRLF", "text\r\n<question>Why?</question>\r\n", "Why?", true},
		{"inside prose", "I could ask <question>why?</question>", "", false},
		{"followed by text", "<question>Why?</question>\nI will go on anyway.", "", false},
		{"empty", "<question>  </question>", "", false},
		{"no closing tag", "<question>Why?", "", false},
		{"other tag", "<ask>Why?</ask>", "", false},
		{"nested opening", "<question>a\n<question>b</question>", "b", true},
		{"none", "All done.", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Question(tt.msg, "question")
			if got != tt.want || ok != tt.ok {
				t.Errorf("Question(%q) = %q, %v; want %q, %v", tt.msg, got, ok, tt.want, tt.ok)
			}
		})
	}
	if q, ok := Question("<ask>Why?</ask>", "ask"); !ok || q != "Why?" {
		t.Errorf("configured tag ask: got %q, %v", q, ok)
	}
	if _, ok := Question("<question>Why?</question>", ""); ok {
		t.Error("an empty tag matched")
	}
}
