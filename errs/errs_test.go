package errs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
