package recorder

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gi-debug/gi/report"
)

// Kept is what a record holds, read back without the process.
type Kept struct {
	Dir     string
	Trigger report.RecordTrigger
	// Summaries are the window's, oldest first; Ps the snapshot at the
	// trigger.
	Summaries []report.RecordSummary
	Ps        *report.Ps
	// Calls counts the calls of calls.jsonl (0: none traced), and
	// Perfetto is perfetto.json's path ("" when there is none).
	Calls    int
	Perfetto string
}

// Bounds on what ReadRecord reads of a record.
const (
	maxRecordFile = 1 << 30
	maxRecordLine = 64 << 20
)

// ReadRecord reads the record in dir (a directory gi record wrote).
func ReadRecord(dir string) (*Kept, error) {
	k := &Kept{Dir: dir}
	trig, err := readBounded(filepath.Join(dir, "trigger.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a record of gi record (no trigger.json)", dir)
		}
		return nil, err
	}
	if err := json.Unmarshal(trig, &k.Trigger); err != nil {
		return nil, fmt.Errorf("%s: trigger.json: %w", dir, err)
	}
	b, err := readBounded(filepath.Join(dir, "ps.json"))
	if err != nil {
		return nil, err
	}
	k.Ps = &report.Ps{}
	if err := json.Unmarshal(b, k.Ps); err != nil {
		return nil, fmt.Errorf("%s: ps.json: %w", dir, err)
	}
	if err := eachLine(filepath.Join(dir, "summaries.jsonl"), func(line []byte) error {
		var s report.RecordSummary
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		k.Summaries = append(k.Summaries, s)
		return nil
	}); err != nil {
		return nil, err
	}
	calls := filepath.Join(dir, "calls.jsonl")
	if _, err := os.Stat(calls); err == nil {
		if err := eachLine(calls, func([]byte) error { k.Calls++; return nil }); err != nil {
			return nil, err
		}
	}
	if p := filepath.Join(dir, "perfetto.json"); fileExists(p) {
		k.Perfetto = p
	}
	return k, nil
}

// readBounded reads a file of a record, at most maxRecordFile bytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxRecordFile {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxRecordFile>>20)
	}
	return b, nil
}

// eachLine calls fn with each line of a JSON-lines file of a record.
func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxRecordFile))
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
