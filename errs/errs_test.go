package errs

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestNewMatchesItselfAndItsKind(t *testing.T) {
	shape := New("linalg: bad shape", ErrInput)
	err := fmt.Errorf("fitting: %w", shape)
	if !errors.Is(err, shape) || !errors.Is(err, ErrInput) {
		t.Fatalf("errors.Is lost the sentinel or its kind: %v", err)
	}
	if errors.Is(err, ErrNotExact) {
		t.Fatal("a bad-input sentinel matched ErrNotExact")
	}
	if shape.Error() != "linalg: bad shape" {
		t.Fatalf("message %q, want the sentinel's own", shape.Error())
	}
	if e := Inputf("k = %d", 3); !errors.Is(e, ErrInput) || e.Error() != "bad input: k = 3" {
		t.Fatalf("Inputf: %v", e)
	}
}

// TestOneVocabulary fails when a package of the module declares a sentinel
// with errors.New instead of New(msg, kind): such an error would match no
// kind, and the CLI would report bad input as an internal failure (exit 1).
func TestOneVocabulary(t *testing.T) {
	eachModuleFile(t, func(fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					call, ok := v.(*ast.CallExpr)
					if !ok {
						continue
					}
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "New" {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "errors" {
							t.Errorf("%s: package-level errors.New; use errs.New(msg, errs.ErrInput or another kind) so callers can classify it", fset.Position(call.Pos()))
						}
					}
				}
			}
		}
	})
}

// optionInText matches a reference to an options field written into a
// string literal: "Options.Hidden", "WorstCaseOptions.Force", "Options.%s".
var optionInText = regexp.MustCompile(`\w*Options\.([A-Z]|%)`)

// TestOptionsNamedApartFromText fails when a string literal of the module
// (outside tests) names an options field as text: an error, warning or note
// holding it would reach the CLI's user as Go instead of the flag that sets
// the field. Such a message is made with Options or InvalidOption (errors)
// or as a Message (warnings, notes), which keep the Option apart.
func TestOptionsNamedApartFromText(t *testing.T) {
	// Text that describes a library call to its reader, never printed in
	// place of a flag: an experiment's note on the runs it made.
	allowed := map[string]bool{
		`"the refined column is the same data with Options.Refine."`: true,
	}
	eachModuleFile(t, func(fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && optionInText.MatchString(lit.Value) && !allowed[lit.Value] {
				t.Errorf("%s: %s names an option as text; use errs.Options, errs.InvalidOption or an errs.Message with an errs.Option", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	})
}

// eachModuleFile calls fn with every Go file of the module's packages
// outside tests, testdata and errs itself.
func eachModuleFile(t *testing.T, fn func(*token.FileSet, *ast.File)) {
	t.Helper()
	root := filepath.Join("..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." || filepath.Base(filepath.Dir(path)) == "errs" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An OptionError reads as fmt.Errorf("%w: …", kind) would, with each option
// written as Go, and matches its kind under errors.Is.
func TestOptionError(t *testing.T) {
	err := InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1)
	if got, want := err.Error(), "bad input: Options.Hidden must be ≥ 0, got -1"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	err = Options(ErrNotExact, "set ", Option{Struct: "Options", Field: "Route", Value: "fpt"}, ".")
	if got, want := err.Error(), "no certified exact solution: set Options.Route = fpt."; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotExact) || errors.Is(err, ErrInput) {
		t.Errorf("%v: wrong kind", err)
	}
}

// A Message reads as Go for a library caller and as the reader's names for
// anyone else: its Options, nested Messages and the OptionErrors of an
// error part are all written by the namer; its JSON is its String.
func TestMessage(t *testing.T) {
	flag := func(o Option) string { return strings.TrimSpace("--" + strings.ToLower(o.Field) + " " + o.Value) }
	inner := InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1)
	m := Message{"set ", Option{Struct: "Options", Field: "Route", Value: "fpt"}, " (", Message{Option{Struct: "Options", Field: "Force"}}, "; ", fmt.Errorf("start: %w", inner), ")"}
	if got, want := m.String(), "set Options.Route = fpt (Options.Force; start: bad input: Options.Hidden must be ≥ 0, got -1)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := m.Text(flag), "set --route fpt (--force; start: bad input: --hidden must be ≥ 0, got -1)"; got != want {
		t.Errorf("Text(flag) = %q, want %q", got, want)
	}
	b, err := json.Marshal([]Message{m, Textf("%d%%", 5)})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal([]string{m.String(), "5%"}); string(b) != string(want) {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back []Message
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 2 || back[0].String() != m.String() {
		t.Errorf("JSON round trip: %v, %v", back, err)
	}
	if Strings(nil) != nil || Texts(nil) != nil {
		t.Error("nil lists must stay nil (a nil warnings list is JSON null, not [])")
	}
}

// An OptionError without a kind is its message alone, for messages that
// wrap their sentinel last; the CLI's ErrorText still finds it.
func TestOptionErrorSentinelLast(t *testing.T) {
	err := fmt.Errorf("%w: %w", Options(nil, "nn: ", Option{Struct: "TrainOptions", Field: "Classes"}, " must be ≥ 0"), ErrInput)
	if got, want := err.Error(), "nn: TrainOptions.Classes must be ≥ 0: bad input"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if !errors.Is(err, ErrInput) {
		t.Error("lost ErrInput")
	}
	if got, want := ErrorText(err, func(o Option) string { return "--classes" }), "nn: --classes must be ≥ 0: bad input"; got != want {
		t.Errorf("ErrorText %q, want %q", got, want)
	}
}
