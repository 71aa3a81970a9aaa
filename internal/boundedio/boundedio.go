// Package boundedio reads byte counts that come from untrusted file headers
// (.npy/.npz and IDX in dataio, safetensors and ONNX in nn) without letting
// a header that lies make the reader allocate more than the stream holds.
package boundedio

import (
	"bytes"
	"errors"
	"io"
)

// IsEOF reports whether err says the stream ended early (io.EOF or
// io.ErrUnexpectedEOF), as io.ReadFull reports a truncated file.
func IsEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

// ReadN reads n bytes from r into a buffer that grows with what actually
// arrives, so a hostile n costs nothing before the bytes are there. It
// returns fewer than n bytes only when r ends first (the caller reports
// the truncation); a read error is returned as is.
func ReadN(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(r, n)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadAll reads r to its end, but no more than max bytes: over reports that
// r holds more than max (b is then nil).
func ReadAll(r io.Reader, max int64) (b []byte, over bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return nil, true, nil
	}
	return b, false, nil
}
