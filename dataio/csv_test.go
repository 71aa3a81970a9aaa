package dataio

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relurec/relurec/errs"
)

// TestCSV covers what the reader accepts: numpy.savetxt and pandas output,
// a header, blank and comment lines, spaces, quotes, CRLF, a UTF-8 BOM.
func TestCSV(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name, in string
		r, c     int
		want     []float64
	}{
		{"plain", "1,2,3\n4,5,6\n", 2, 3, []float64{1, 2, 3, 4, 5, 6}},
		{"header", "x1,x2,y\n1,2,3\n4,5,6\n", 2, 3, []float64{1, 2, 3, 4, 5, 6}},
		{"blank lines, spaces, CRLF", "\r\n a , b \r\n\r\n1, 2 \r\n   \r\n3,4\r\n\r\n", 2, 2, []float64{1, 2, 3, 4}},
		{"CRLF", "x,y\r\n1,2\r\n3,4\r\n", 2, 2, []float64{1, 2, 3, 4}},
		{"CRLF no final newline", "1,2\r\n3,4", 2, 2, []float64{1, 2, 3, 4}},
		{"savetxt comment", "# x,y\n1,2\n", 1, 2, []float64{1, 2}},
		{"no final newline", "-1,2", 1, 2, []float64{-1, 2}},
		{"one column", "1\n\n2.5\n3\n", 3, 1, []float64{1, 2.5, 3}},
		{"one column with header", "y\n1\n2\n", 2, 1, []float64{1, 2}},
		{"quoted numbers", "\"1\", \" 2 \"\n3,\"4e1\"\n", 2, 2, []float64{1, 2, 3, 40}},
		{"quoted header", "\"a\", \"b c\"\n1,2\n", 1, 2, []float64{1, 2}},
		{"header with empty field", "a,,c\n1,2,3\n", 1, 3, []float64{1, 2, 3}},
		// numpy gives 0 for an underflow too; only overflow is an error.
		{"underflow is zero", "1e-400,2\n", 1, 2, []float64{0, 2}},
		// nan and inf text is read as NaN and ±Inf, as numpy does;
		// callers reject them with CheckFinite.
		{"nan and inf text", "nan,inf\n-Inf,NaN\n", 2, 2, []float64{math.NaN(), inf, -inf, math.NaN()}},
		// Excel's "CSV UTF-8" export starts with a byte-order mark.
		{"BOM, no header", "\ufeff1,2\n3,4\n", 2, 2, []float64{1, 2, 3, 4}},
		{"BOM, header", "\ufeffx,y\r\n1,2\r\n", 1, 2, []float64{1, 2}},
		{"BOM, one column", "\ufeff7\n8\n", 2, 1, []float64{7, 8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := decodeCSV(strings.NewReader(tc.in), readCfg{})
			if err != nil {
				t.Fatal(err)
			}
			denseEqual(t, m, tc.r, tc.c, tc.want)
		})
	}

	p := filepath.Join(t.TempDir(), "d.CSV")
	os.WriteFile(p, []byte("a,b\n1,2\n"), 0o644)
	m, err := ReadMatrix(p, "X")
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 1, 2, []float64{1, 2})
}

// TestCSVErrors checks that each bad file is an error wrapping the right
// sentinel (and errs.ErrInput) whose message names the line (counting every
// physical line), the column and the offending text.
func TestCSVErrors(t *testing.T) {
	long := strings.Repeat("z", 100)
	cases := []struct {
		name, in, msg string
		sentinel      error
	}{
		{"ragged", "1,2,3\n4,5,6\n\n7,8\n", "line 4 has 2 fields but the first row has 3", ErrFormat},
		{"ragged vs header", "a,b\n1,2,3\n", "line 2 has 3 fields but the header on line 1 has 2", ErrFormat},
		{"not a number", "a,b\n1,2\n3,x\n", `line 3, column 2: "x" is not a number`, ErrFormat},
		{"line counts header, blank and comment lines", "x,y,z\n\n# note\n1,2,3\n\n4,5,abc\n", `line 6, column 3: "abc" is not a number`, ErrFormat},
		{"line counts CRLF lines", "x,y\r\n\r\n1,2\r\n3,x\r\n", `line 4, column 2: "x" is not a number`, ErrFormat},
		{"empty field", "1,2\n3,\n", `line 2, column 2: "" is not a number`, ErrFormat},
		{"long text is cut", "1\n" + long + "\n", `line 2, column 1: "` + long[:40] + `…" is not a number`, ErrFormat},
		{"bad quote", "1,\"2\n", "malformed CSV", ErrFormat},
		{"overflow", "x\n1e400\n", "line 2, column 1: 1e400 is out of the float64 range (±1.8e308)", ErrFormat},
		{"negative overflow", "1,-2e308\n", "line 1, column 2: -2e308 is out of the float64 range (±1.8e308)", ErrFormat},
		// A first row with numbers and text is an error, not a header: a
		// header must be text in every field, so one bad value cannot
		// silently drop a data row.
		{"mixed first row", "1,abc,3\n4,5,6\n", `line 1, column 2: "abc" is not a number but column 1 (1) is`, ErrFormat},
		{"mixed first row after comments", "# c\n\n\"x\", 2 \n3,4\n", `line 3, column 1: "x" is not a number but column 2 (2) is`, ErrFormat},
		{"mixed first row with overflow", "1e400,y\n1,2\n", `line 1, column 2: "y" is not a number but column 1 (1e400) is`, ErrFormat},
		// pandas' to_csv with its default index and integer column names.
		{"pandas index header", ",0,1\n0,1.5,2\n1,3,4e-3\n", `line 1, column 1: "" is not a number but column 2 (0) is; the first row must be either a header (no numbers) or data (only numbers) (pandas writes its index as an unnamed first column: save with df.to_csv(path, index=False))`, ErrFormat},
		{"only header", "a,b\n", "no data rows", ErrEmpty},
		{"only BOM and header", "\ufeffa,b\r\n", "no data rows", ErrEmpty},
		{"only BOM", "\ufeff", "no data rows", ErrEmpty},
		{"only comments", "# a\n\n#b\n", "no data rows", ErrEmpty},
		{"empty", "", "no data rows", ErrEmpty},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCSV(strings.NewReader(tc.in), readCfg{})
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.sentinel, tc.msg)
			}
			if strings.Contains(err.Error(), long) {
				t.Fatalf("message repeats the whole 100-character field: %v", err)
			}
		})
	}

	p := filepath.Join(t.TempDir(), "data.csv")
	os.WriteFile(p, []byte("a,b,c\n1,2,3\n\n# ok\n4,5,6\n7,8,9\n7,8,abc\n"), 0o644)
	_, err := ReadMatrix(p, "")
	if want := p + `: line 7, column 3: "abc" is not a number`; !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want one containing %q", err, want)
	}
}

// FuzzReadCSV checks that no input makes the CSV reader panic, that its
// errors wrap ErrFormat or ErrEmpty, and that whatever it accepts is a
// non-empty matrix.
func FuzzReadCSV(f *testing.F) {
	f.Add("a,b\n1,2\n3,4\n")
	f.Add("1,2,3\n\n4,5\n")
	f.Add("\"1\",\"x\"\"\"\n")
	f.Add("\ufeffx,y\r\n1,2\r\n# c\r\n3,1e400\r\n")
	f.Add("1,abc\n")
	f.Add("\"1\n2\",3\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := decodeCSV(strings.NewReader(s), readCfg{})
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if r, c := m.Dims(); r == 0 || c == 0 {
			t.Fatal("empty matrix accepted")
		}
	})
}
