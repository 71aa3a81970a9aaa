package extract

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/safefile"
)

// Checkpoint is an append-only log of an oracle's answers that lets an
// interrupted extraction resume. An extraction is deterministic given its
// options, d and the oracle's answers, so a rerun sends the same batches of
// queries in the same order: the log keys each answer by a SHA-256 hash of
// its batch (shape and float64 bits), and a batch whose hash is in the log
// is answered from it without calling the oracle. The k-th occurrence of a
// batch in a run takes the k-th answer logged for it, so a run that sends
// one batch twice replays exactly what the oracle said each time. The
// queries themselves are not stored (2^20 queries of 784 inputs would take
// 6.6 GB), only their hashes and the answers.
//
// The file holds a header (d, the options that shape the queries, and a
// name of the model behind the oracle), then one record per batch the
// oracle answered, each with a checksum: a record torn by a kill is
// dropped, with anything after it, when the file is opened. Records are
// written as they come and synced to disk at most every two seconds and on
// Close. A completed run's checkpoint replays the whole run without a
// query. One process at a time may use a checkpoint file.
//
// Pass it to Extract in Options.Checkpoint.
type Checkpoint struct {
	f    *os.File
	path string
	head header
	// logged lists each batch hash's records in file order, used how
	// many of them this run has taken.
	logged map[[sha256.Size]byte][]record
	used   map[[sha256.Size]byte]int
	end    int64 // offset past the last whole record
	p      int   // outputs per answer (0: no record yet)
	// replayed counts the queries (rows) answered from the log, sent
	// those sent to the oracle.
	replayed, sent int
	// rows is the number of queries whose answers the file holds.
	rows    int
	synced  time.Time
	dropped int64
}

// record is one logged answer: rows×cols float64 values at off.
type record struct {
	off        int64
	rows, cols int
}

// header is what a checkpoint was written for, stored as JSON after the
// magic string.
type header struct {
	D       int             `json:"d"`
	Model   string          `json:"model"`
	Options json.RawMessage `json:"options"`
}

// checkpointMagic starts every checkpoint file; checkpointVersion is the
// layout of what follows.
const (
	checkpointMagic   = "relurec extract checkpoint\n"
	checkpointVersion = 1
	// syncEvery is the longest a logged answer waits for fsync.
	syncEvery = 2 * time.Second
	// recordHead is a record's hash, rows and cols; recordTail its CRC-32C.
	recordHead = sha256.Size + 8
	recordTail = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// OpenCheckpoint opens the checkpoint file at path for an extraction of
// d inputs with options opt from the model named model (for example the
// SHA-256 of its file, or the command that serves it: answers of one model
// replayed for another would extract the wrong network). A missing file is
// created with its header. An existing one must have been written for the
// same d, model and options that shape the queries (everything but
// MaxQueries, Exact and Progress: a run may resume with a larger budget);
// otherwise the error wraps errs.ErrInput, says what differs, and the file
// is left as it was. A torn last record is dropped (the file truncated
// after the last whole one, reported by Dropped).
func OpenCheckpoint(path string, d int, opt Options, model string) (*Checkpoint, error) {
	if d < 1 {
		return nil, errs.Inputf("extract.OpenCheckpoint: d = %d inputs; need d ≥ 1", d)
	}
	o, err := queryOptions(opt)
	if err != nil {
		return nil, err
	}
	if _, err := safefile.Target(path); err != nil {
		return nil, fmt.Errorf("extract.OpenCheckpoint: %w", err)
	}
	c := &Checkpoint{path: path, head: header{D: d, Model: model, Options: o},
		logged: map[[sha256.Size]byte][]record{}, used: map[[sha256.Size]byte]int{}, synced: time.Now()}
	if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || err == nil && st.Size() == 0 {
		if err := c.create(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, errs.Inputf("checkpoint %s: %v", path, err)
	}
	if c.f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
		return nil, errs.Inputf("checkpoint %s: %v", path, err)
	}
	if err := c.load(); err != nil {
		c.f.Close()
		return nil, err
	}
	return c, nil
}

// queryOptions is the JSON of the options that shape the queries, with
// the defaults filled in so that a default given explicitly matches it.
func queryOptions(opt Options) (json.RawMessage, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if len(opt.Widths) == 1 {
		opt.Hidden, opt.Widths = opt.Widths[0], nil
	}
	opt.MaxQueries, opt.Exact = 0, false
	return json.Marshal(opt)
}

// create writes a new checkpoint holding only its header, atomically
// (internal/safefile), so that the file either does not exist or has a
// whole header.
func (c *Checkpoint) create() error {
	h, err := json.Marshal(c.head)
	if err != nil {
		return err
	}
	err = safefile.WriteFile(c.path, func(w io.Writer) error {
		b := append([]byte(checkpointMagic), binary.LittleEndian.AppendUint32(nil, checkpointVersion)...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
		b = append(b, h...)
		_, err := w.Write(binary.LittleEndian.AppendUint32(b, crc32.Checksum(h, castagnoli)))
		return err
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// load reads and checks the header, indexes the whole records and drops a
// torn tail.
func (c *Checkpoint) load() error {
	st, err := c.f.Stat()
	if err != nil {
		return errs.Inputf("checkpoint %s: %v", c.path, err)
	}
	size := st.Size()
	r := io.NewSectionReader(c.f, 0, size)
	notOne := errs.Inputf("%s is not a relurec extract checkpoint, or its header is damaged; name a new file for the checkpoint (or delete that one if it is a damaged checkpoint)", c.path)
	magic := make([]byte, len(checkpointMagic)+8)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic[:len(checkpointMagic)]) != checkpointMagic {
		return notOne
	}
	if v := binary.LittleEndian.Uint32(magic[len(checkpointMagic):]); v != checkpointVersion {
		return errs.Inputf("checkpoint %s has layout version %d; this relurec reads version %d: delete it to start afresh", c.path, v, checkpointVersion)
	}
	n := int64(binary.LittleEndian.Uint32(magic[len(checkpointMagic)+4:]))
	if n > size {
		return notOne
	}
	h := make([]byte, n+4)
	if _, err := io.ReadFull(r, h); err != nil || crc32.Checksum(h[:n], castagnoli) != binary.LittleEndian.Uint32(h[n:]) {
		return notOne
	}
	var got header
	if err := json.Unmarshal(h[:n], &got); err != nil {
		return notOne
	}
	if err := c.head.mismatch(got, c.path); err != nil {
		return err
	}
	c.end = int64(len(magic)) + n + 4
	for c.end < size {
		rec, h, ok := c.readRecord(r, size)
		if !ok {
			break
		}
		c.logged[h] = append(c.logged[h], rec)
		c.p = rec.cols
		c.rows += rec.rows
		c.end = rec.off + int64(8*rec.rows*rec.cols) + recordTail
	}
	if c.end < size {
		// A record torn by a kill (or damaged): it and anything after
		// it are dropped, so that new records follow the last whole one.
		c.dropped = size - c.end
		if err := c.f.Truncate(c.end); err != nil {
			return fmt.Errorf("checkpoint %s: dropping a torn record: %w", c.path, err)
		}
	}
	return nil
}

// readRecord reads the record at c.end; ok is false for a torn or
// damaged one.
func (c *Checkpoint) readRecord(r *io.SectionReader, size int64) (rec record, h [sha256.Size]byte, ok bool) {
	head := make([]byte, recordHead)
	if _, err := r.ReadAt(head, c.end); err != nil {
		return rec, h, false
	}
	copy(h[:], head)
	rows := int64(binary.LittleEndian.Uint32(head[sha256.Size:]))
	cols := int64(binary.LittleEndian.Uint32(head[sha256.Size+4:]))
	n := 8 * rows * cols
	if rows == 0 || cols == 0 || c.p != 0 && int(cols) != c.p || c.end+recordHead+n+recordTail > size {
		return rec, h, false
	}
	body := make([]byte, n+recordTail)
	if _, err := r.ReadAt(body, c.end+recordHead); err != nil {
		return rec, h, false
	}
	sum := crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, body[:n])
	if sum != binary.LittleEndian.Uint32(body[n:]) {
		return rec, h, false
	}
	return record{off: c.end + recordHead, rows: int(rows), cols: int(cols)}, h, true
}

// mismatch says how the header got differs from want (the run's), and
// what to do, as an error wrapping errs.ErrInput that names the options by
// field (errs.Option); nil when they agree.
func (want header) mismatch(got header, path string) error {
	var parts []any
	add := func(p ...any) {
		if len(parts) > 0 {
			parts = append(parts, "; ")
		}
		parts = append(parts, p...)
	}
	if got.D != want.D {
		add(fmt.Sprintf("d = %d inputs (this run: %d)", got.D, want.D))
	}
	if got.Model != want.Model {
		add(fmt.Sprintf("the model %q (this run: %q)", got.Model, want.Model))
	}
	var a, b Options
	if json.Unmarshal(got.Options, &a) != nil || json.Unmarshal(want.Options, &b) != nil {
		add("options this relurec cannot read")
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		f := va.Type().Field(i)
		if f.Tag.Get("json") == "-" || reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		add(errs.Option{Struct: "Options", Field: f.Name, Value: optionValue(va.Field(i))}, " (this run: "+optionValue(vb.Field(i))+")")
	}
	if len(parts) == 0 {
		return nil
	}
	parts = append([]any{"checkpoint " + path + " was written for another extraction: "}, parts...)
	parts = append(parts, ". Rerun with what it was written for to resume it, or delete it (or name a new file) to start afresh")
	return errs.Options(errs.ErrInput, parts...)
}

// optionValue writes an option's value as a flag takes it: a list of
// widths as "32,16", none as "none".
func optionValue(v reflect.Value) string {
	if v.Kind() != reflect.Slice {
		return fmt.Sprint(v.Interface())
	}
	if v.Len() == 0 {
		return "none"
	}
	s := make([]string, v.Len())
	for i := range s {
		s[i] = fmt.Sprint(v.Index(i).Interface())
	}
	return strings.Join(s, ",")
}

// Replayed is the number of queries (rows) answered from the log since the
// checkpoint was opened.
func (c *Checkpoint) Replayed() int { return c.replayed }

// Sent is the number of queries sent to the oracle since the checkpoint
// was opened.
func (c *Checkpoint) Sent() int { return c.sent }

// Logged is the number of queries whose answers the file holds.
func (c *Checkpoint) Logged() int { return c.rows }

// Dropped is the number of bytes of a torn or damaged tail dropped when
// the file was opened (0: none).
func (c *Checkpoint) Dropped() int64 { return c.dropped }

// Path is the checkpoint's file.
func (c *Checkpoint) Path() string { return c.path }

// Close syncs the log to disk and closes it.
func (c *Checkpoint) Close() error {
	if c == nil || c.f == nil {
		return nil
	}
	err := c.f.Sync()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.path, err)
	}
	return nil
}

// extract is Extract with the oracle's answers logged to (and replayed
// from) c; Diagnostics.Replayed counts the queries replayed.
func (c *Checkpoint) extract(ctx context.Context, oracle Oracle, d int, opt Options) (*Result, error) {
	if c.f == nil {
		return nil, errs.Inputf("extract.Extract: checkpoint %s is closed", c.path)
	}
	o, err := queryOptions(opt)
	if err != nil {
		return nil, err
	}
	if err := (header{D: d, Model: c.head.Model, Options: o}).mismatch(c.head, c.path); err != nil {
		return nil, fmt.Errorf("%w: %w", errs.Options(nil, "extract.Extract: ", errs.Option{Struct: "Options", Field: "Checkpoint"}, " was opened for other options"), err)
	}
	opt.Checkpoint = nil
	before := c.replayed
	res, err := Extract(ctx, c.wrap(oracle), d, opt)
	if res != nil {
		res.Diagnostics.Replayed = c.replayed - before
	}
	return res, err
}

// wrap is oracle answering from the log where it can, and logging what
// it answers.
func (c *Checkpoint) wrap(oracle Oracle) Oracle {
	return func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		h := batchHash(X)
		k := c.used[h]
		if recs := c.logged[h]; k < len(recs) {
			Y, err := c.read(recs[k])
			if err != nil {
				return nil, err
			}
			c.used[h]++
			c.replayed += recs[k].rows
			return Y, nil
		}
		Y, err := oracle(ctx, X)
		if err == nil && Y != nil && c.p != 0 {
			if _, k := Y.Dims(); k != c.p {
				return nil, errs.Inputf("the model answers with %d outputs; the answers logged in checkpoint %s have %d: it was written for another model. Delete it (or name a new file) to start afresh", k, c.path, c.p)
			}
		}
		if err != nil || !c.fits(X, Y) {
			// counted refuses a malformed answer; nothing to log.
			return Y, err
		}
		if err := c.append(h, Y); err != nil {
			return nil, err
		}
		c.used[h]++
		c.sent += Y.RawMatrix().Rows
		return Y, nil
	}
}

// fits reports an answer worth logging: one finite row per query, with the
// outputs of the answers logged before.
func (c *Checkpoint) fits(X, Y *mat.Dense) bool {
	if Y == nil {
		return false
	}
	r, k := Y.Dims()
	if n, _ := X.Dims(); r != n || k == 0 {
		return false
	}
	for i := 0; i < r; i++ {
		for _, v := range Y.RawRowView(i) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

// batchHash is the SHA-256 of X's shape and of the SHA-256 of each block
// of hashRows rows (float64 bits, little-endian, row by row). The blocks
// are hashed in parallel: hashing is a checkpoint's main cost when the
// oracle is fast.
func batchHash(X *mat.Dense) [sha256.Size]byte {
	r, k := X.Dims()
	blocks := make([]byte, sha256.Size*((r+hashRows-1)/hashRows))
	parallel.For(len(blocks)/sha256.Size, func(_, b int) {
		s := sha256.New()
		buf := make([]byte, 8*k)
		for i := b * hashRows; i < min(r, (b+1)*hashRows); i++ {
			for j, v := range X.RawRowView(i) {
				binary.LittleEndian.PutUint64(buf[8*j:], math.Float64bits(v))
			}
			s.Write(buf)
		}
		s.Sum(blocks[b*sha256.Size : b*sha256.Size])
	})
	s := sha256.New()
	s.Write(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uint32(r)), uint32(k)))
	s.Write(blocks)
	var h [sha256.Size]byte
	s.Sum(h[:0])
	return h
}

// hashRows is the rows of a block batchHash hashes on its own.
const hashRows = 256

// read returns the answer logged in rec.
func (c *Checkpoint) read(rec record) (*mat.Dense, error) {
	b := make([]byte, 8*rec.rows*rec.cols)
	if _, err := c.f.ReadAt(b, rec.off); err != nil {
		return nil, fmt.Errorf("checkpoint %s: reading a logged answer: %w", c.path, err)
	}
	v := make([]float64, rec.rows*rec.cols)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return mat.NewDense(rec.rows, rec.cols, v), nil
}

// append logs Y as the answer to the batch hashed h, in one write; it
// syncs the file when the last sync is syncEvery old.
func (c *Checkpoint) append(h [sha256.Size]byte, Y *mat.Dense) error {
	r, k := Y.Dims()
	b := make([]byte, 0, recordHead+8*r*k+recordTail)
	b = append(b, h[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(r))
	b = binary.LittleEndian.AppendUint32(b, uint32(k))
	for i := 0; i < r; i++ {
		for _, v := range Y.RawRowView(i) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if _, err := c.f.WriteAt(b, c.end); err != nil {
		return fmt.Errorf("checkpoint %s: logging an answer: %w", c.path, err)
	}
	c.logged[h] = append(c.logged[h], record{off: c.end + recordHead, rows: r, cols: k})
	c.end += int64(len(b))
	c.p = k
	c.rows += r
	if time.Since(c.synced) >= syncEvery {
		c.synced = time.Now()
		if err := c.f.Sync(); err != nil {
			return fmt.Errorf("checkpoint %s: %w", c.path, err)
		}
	}
	return nil
}
