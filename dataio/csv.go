package dataio

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// utf8BOM is the byte-order mark Excel's "CSV UTF-8" export (and Windows
// Notepad) put at the start of a file. Left in place it would glue itself to
// the first field, making a numeric first row look like a header.
const utf8BOM = "\ufeff"

// maxShownField is how many characters of an offending field an error quotes:
// enough to recognise it, short enough that a binary file or a megabyte-long
// line does not flood the terminal.
const maxShownField = 40

// readCSVFile reads a numeric CSV file from disk.
func readCSVFile(path string, cfg readCfg) (*mat.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := decodeCSV(cfg.reader(f), cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// decodeCSV reads comma-separated numbers, one sample per line, as
// numpy.loadtxt(path, delimiter=",") does, but reports every problem instead
// of guessing:
//
//   - a UTF-8 byte-order mark at the start is dropped;
//   - blank lines, and lines starting with '#' (numpy.savetxt's header), are
//     skipped; spaces around a field, and double quotes around it, are not
//     part of the value;
//   - the first remaining row is a header, and skipped, only when none of its
//     fields is a number (pandas' to_csv(index=False), hand-written column
//     names); a first row mixing text and numbers is an error, since either
//     reading of it would silently lose or invent data;
//   - every row must have as many fields as the first;
//   - a field that is not a number, or a number beyond ±1.8e308 (which numpy
//     would read as ±Inf), is an error naming its line, counting every
//     physical line from 1, and its column, counting from 1. Underflow reads
//     as 0, as in numpy.
//
// The text "nan", "inf", "-inf" and "infinity" (any case) is read as NaN or
// ±Inf, as numpy reads it; callers reject those with CheckFinite.
//
// Reading stops after cfg's row limit; a matrix outgrowing the memory
// budget is an error wrapping ErrTooLarge. Bad content gives an error
// wrapping ErrFormat, a file without data rows one wrapping ErrEmpty.
func decodeCSV(r io.Reader, cfg readCfg) (*mat.Dense, error) {
	cr := csv.NewReader(skipBOM(r))
	cr.FieldsPerRecord = -1 // we check raggedness ourselves, to name the line
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	cr.ReuseRecord = true

	var (
		data    []float64
		cols    = -1
		rows    int
		hdrLine int
		// the matrix grows row by row; the budget caps its elements
		maxElems = MemoryBudget() / 8
	)
	for cfg.maxRows == 0 || rows < cfg.maxRows {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: malformed CSV (%v): %w", pe.StartLine, pe.Err, ErrFormat)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a line of blanks
		}
		if cols < 0 {
			cols = len(rec)
			header, err := isHeader(cr, rec)
			if err != nil {
				return nil, err
			}
			if header {
				hdrLine = line
				continue
			}
		}
		if len(rec) != cols {
			what := "the first row"
			if hdrLine > 0 {
				what = fmt.Sprintf("the header on line %d", hdrLine)
			}
			return nil, fmt.Errorf("line %d has %d fields but %s has %d; every row must have the same number of comma-separated values: %w",
				line, len(rec), what, cols, ErrFormat)
		}
		if int64(len(data)+cols) > maxElems {
			return nil, fmt.Errorf("line %d: %w", line, checkBudget(rows+1, cols))
		}
		for j, f := range rec {
			v, err := parseField(cr, j, f)
			if err != nil {
				return nil, err
			}
			data = append(data, v)
		}
		rows++
	}
	if rows == 0 || cols <= 0 {
		return nil, fmt.Errorf("CSV holds no data rows: %w", ErrEmpty)
	}
	return mat.NewDense(rows, cols, data), nil
}

// skipBOM returns r without a leading UTF-8 byte-order mark. A read error
// while peeking is left for the CSV reader to report.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(len(utf8BOM)); string(b) == utf8BOM {
		br.Discard(len(utf8BOM))
	}
	return br
}

// isHeader reports whether rec, the first non-blank, non-comment row, is a
// header: no field of it is a number. A row holding both numbers and text is
// an error naming the first text field and the first number, since skipping
// it would drop a data row with one typo and reading it would fail anyway.
func isHeader(cr *csv.Reader, rec []string) (bool, error) {
	text, num := -1, -1
	for j, f := range rec {
		switch {
		case isNumber(f):
			if num < 0 {
				num = j
			}
		case text < 0:
			text = j
		}
	}
	if text < 0 {
		return false, nil
	}
	if num < 0 {
		return true, nil
	}
	line, _ := cr.FieldPos(text)
	hint := ""
	if text == 0 && strings.TrimSpace(rec[0]) == "" {
		// pandas' DataFrame.to_csv() writes the index as an unnamed first
		// column, so its header row starts with an empty field.
		hint = " (pandas writes its index as an unnamed first column: save with df.to_csv(path, index=False))"
	}
	return false, fmt.Errorf("line %d, column %d: %s is not a number but column %d (%s) is; the first row must be either a header (no numbers) or data (only numbers)%s: %w",
		line, text+1, quoteField(rec[text]), num+1, shortField(strings.TrimSpace(rec[num])), hint, ErrFormat)
}

// isNumber reports whether field, without its surrounding spaces, is written
// as a number, including one too large for a float64.
func isNumber(field string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// parseField parses field j of the record cr has just read. Overflow is told
// apart from bad syntax because "not a number" would be a baffling message
// for 1e400.
func parseField(cr *csv.Reader, j int, field string) (float64, error) {
	s := strings.TrimSpace(field)
	v, err := strconv.ParseFloat(s, 64)
	if err == nil {
		return v, nil
	}
	// The field's own line, which differs from the record's when an
	// earlier quoted field spans lines.
	line, _ := cr.FieldPos(j)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("line %d, column %d: %s is out of the float64 range (±1.8e308): %w",
			line, j+1, shortField(s), ErrFormat)
	}
	return 0, fmt.Errorf("line %d, column %d: %s is not a number: %w",
		line, j+1, quoteField(field), ErrFormat)
}

// quoteField quotes a field's text, trimmed and cut to maxShownField
// characters, for an error message; quoting shows an empty field and
// escapes control bytes.
func quoteField(field string) string {
	return strconv.Quote(shortField(strings.TrimSpace(field)))
}

// shortField cuts s after maxShownField characters, marking the cut with "…".
func shortField(s string) string {
	n := 0
	for i := range s {
		if n == maxShownField {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
