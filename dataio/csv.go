package dataio

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// readCSVFile reads a numeric CSV file from disk.
func readCSVFile(path string) (*mat.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := decodeCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// decodeCSV reads comma-separated numbers, one sample per line. The first
// non-blank line is taken as a header (and skipped) when any of its fields
// is not a number, which covers pandas' DataFrame.to_csv and hand-written
// column names. Blank lines and lines starting with '#' (numpy.savetxt's
// header) are skipped. Every row must have as many fields as the first.
func decodeCSV(r io.Reader) (*mat.Dense, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // we check raggedness ourselves, to name the line
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	cr.ReuseRecord = true

	var (
		data    []float64
		cols    = -1
		rows    int
		first   = true
		hdrLine int
	)
	for {
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
		if first {
			first = false
			cols = len(rec)
			if !allNumeric(rec) {
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
		for j, f := range rec {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, fmt.Errorf("line %d, column %d: %q is not a number (expected comma-separated numbers after an optional header row): %w",
					line, j+1, f, ErrFormat)
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

func allNumeric(rec []string) bool {
	for _, f := range rec {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
			return false
		}
	}
	return true
}
