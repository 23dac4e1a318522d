// Package docgen generates the reference pages of docs/ from the code that
// is their source of truth: config keys and defaults (internal/config),
// stop conditions with JSON examples (internal/stop), run and step
// statuses, phases and events (their Go constants and comments), and
// loopctl's exit codes. A test fails when a checked-in page differs from
// what Generate produces; regenerate with
//
//	go run ./internal/docgen/gendocs
//
// (or go generate ./internal/docgen) from the repository root.
package docgen

//go:generate go run ./gendocs -root ../..

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"text/template"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
)

//go:embed templates/*.md.tmpl
var templates embed.FS

// Pages maps each generated page's path, relative to the repository root,
// to its template.
var Pages = map[string]string{
	"docs/configuration.md":   "configuration.md.tmpl",
	"docs/stop-conditions.md": "stop-conditions.md.tmpl",
	"docs/reference.md":       "reference.md.tmpl",
}

// Generate renders every page of Pages. root is the repository root: some
// facts are read from its Go sources (constants and their comments).
func Generate(root string) (map[string][]byte, error) {
	data, err := collect(root)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{"cell": cell, "code": code, "value": value}).ParseFS(templates, "templates/*.md.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse templates: %w", err)
	}
	out := make(map[string][]byte, len(Pages))
	for page, name := range Pages {
		var b bytes.Buffer
		if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", page, err)
		}
		out[page] = b.Bytes()
	}
	return out, nil
}

// Const is a Go constant and its comment.
type Const struct {
	Name, Value, Doc string
}

// Status is a run status with its exit code.
type Status struct {
	Const
	Terminal bool
	ExitCode int
}

// Condition is a stop condition type as the reference shows it.
type Condition struct {
	Type, Summary, JSON, Description, Reason string
	Priority                                 int
}

type pageData struct {
	Keys           []config.KeyDoc
	Conditions     []Condition
	RunStatuses    []Status
	StepStatuses   []Const
	Phases         []Const
	Events         []Const
	ExitCodes      []Const
	ShorthandRows  []shorthand
	GeneratedBy    string
	ConfigFieldDoc map[string]string
}

type shorthand struct{ Key, Condition string }

func collect(root string) (*pageData, error) {
	d := &pageData{GeneratedBy: "go run ./internal/docgen/gendocs"}
	fieldDocs, err := configFieldDocs(filepath.Join(root, "internal/config/config.go"))
	if err != nil {
		return nil, err
	}
	for _, k := range config.Reference() {
		if k.Meaning == "" {
			k.Meaning = fieldDocs[k.Key]
		}
		if k.Meaning == "" {
			return nil, fmt.Errorf("config key %s has no description: add it to keyDocs in internal/config/reference.go", k.Key)
		}
		d.Keys = append(d.Keys, k)
	}
	for _, t := range stop.Reference() {
		if t.Summary == "" || t.Example == nil {
			return nil, fmt.Errorf("stop condition %s has no summary or example: add them to its descriptor in internal/stop/conditions.go", t.Type)
		}
		raw, err := t.Example.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, raw, "", "  "); err != nil {
			return nil, err
		}
		d.Conditions = append(d.Conditions, Condition{Type: string(t.Type), Summary: t.Summary, JSON: pretty.String(),
			Description: t.Example.Description(), Reason: t.Example.Reason(), Priority: t.Example.Priority()})
	}
	types := filepath.Join(root, "internal/api/types.go")
	runStatuses, err := consts(types, "RunStatus")
	if err != nil {
		return nil, err
	}
	for _, c := range runStatuses {
		s := api.RunStatus(c.Value)
		d.RunStatuses = append(d.RunStatuses, Status{Const: c, Terminal: s.Terminal(), ExitCode: s.ExitCode()})
	}
	if d.StepStatuses, err = consts(types, "StepStatus"); err != nil {
		return nil, err
	}
	if d.Phases, err = consts(types, "Phase"); err != nil {
		return nil, err
	}
	if d.Events, err = consts(filepath.Join(root, "internal/events/events.go"), "Type"); err != nil {
		return nil, err
	}
	if d.ExitCodes, err = consts(filepath.Join(root, "cmd/loopctl/errors.go"), ""); err != nil {
		return nil, err
	}
	return d, nil
}

// consts reads the constants of the given type declared in file, in order,
// with their line (or doc) comments. typ "" takes untyped integer
// constants.
func consts(file, typ string) ([]Const, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	var out []Const
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			name := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				name = id.Name
			}
			if name != typ || len(vs.Values) != len(vs.Names) {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				val := lit.Value
				if lit.Kind == token.STRING {
					if val, err = strconv.Unquote(lit.Value); err != nil {
						return nil, err
					}
				} else if lit.Kind != token.INT {
					continue
				}
				doc := commentText(vs.Comment)
				if doc == "" {
					doc = commentText(vs.Doc)
				}
				out = append(out, Const{Name: n.Name, Value: val, Doc: doc})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s declares no constants of type %q", file, typ)
	}
	return out, nil
}

func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// configFieldDocs maps each config key to its Config field's doc comment:
// the description of a key that keyDocs does not describe yet.
func configFieldDocs(file string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(field.Tag.Value)
			key, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if key != "" {
				out[key] = strings.NewReplacer("[", "", "]", "").Replace(commentText(field.Doc))
			}
		}
		return false
	})
	return out, nil
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// value shows a default: as code, unless it is prose that already holds
// code ("`.env` if present").
func value(s string) string {
	if strings.Contains(s, "`") || s == "none" || strings.HasPrefix(s, "from ") || strings.HasPrefix(s, "built ") {
		return cell(s)
	}
	return cell(code(s))
}

// code wraps s in backticks that survive a backtick inside it.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}
