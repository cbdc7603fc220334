package seed

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
)

// The tests in *_real_test.go compare this package with the real PyTorch,
// numpy and torchvision, run by Debian's /usr/bin/python3 (the python3 on
// PATH may be another build without them). testdata/oracle.py computes the
// expected values at test time; nothing expected is stored.

const python = "/usr/bin/python3"

type request map[string]any

var (
	pythonOnce sync.Once
	pythonErr  error
)

// requirePython fails the test when the real libraries are missing: a
// skipped comparison would pass without comparing anything.
func requirePython(t *testing.T) {
	t.Helper()
	pythonOnce.Do(func() {
		out, err := exec.Command(python, "-c", "import torch, numpy, torchvision").CombinedOutput()
		if err != nil {
			pythonErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if pythonErr != nil {
		t.Fatalf("%s cannot import torch, numpy and torchvision (%v)\n"+
			"run test/deps.sh to install python3-torch, python3-numpy and python3-torchvision", python, pythonErr)
	}
}

// oracle runs the requests through testdata/oracle.py and returns one raw
// JSON answer per request. An answer that is an error fails the test unless
// allowErrors is set.
func oracle(t *testing.T, reqs []request, allowErrors bool) []json.RawMessage {
	t.Helper()
	requirePython(t)
	in, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "testdata/oracle.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle.py: %v\n%s", err, stderr.String())
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("oracle.py answer: %v", err)
	}
	if len(answers) != len(reqs) {
		t.Fatalf("oracle.py gave %d answers to %d requests", len(answers), len(reqs))
	}
	if !allowErrors {
		for i, a := range answers {
			if msg, ok := oracleError(a); ok {
				t.Fatalf("oracle.py failed on %v: %s", reqs[i], msg)
			}
		}
	}
	return answers
}

// oracleError returns the message of an {"error": ...} answer.
func oracleError(a json.RawMessage) (string, bool) {
	var e struct {
		Error *string `json:"error"`
	}
	if len(a) == 0 || a[0] != '{' || json.Unmarshal(a, &e) != nil || e.Error == nil {
		return "", false
	}
	return *e.Error, true
}

func decode[T any](t *testing.T, a json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a, &v); err != nil {
		t.Fatalf("decoding %.200s: %v", a, err)
	}
	return v
}

// digest is oracle.py's digest of a list: sha256 of little-endian int64s.
func digest(v []int) string {
	h := sha256.New()
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], uint64(int64(x)))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sameList compares got with an oracle answer that is either a list or a
// digest of one, and returns a description of the difference.
func sameList(t *testing.T, got []int, want json.RawMessage) (string, bool) {
	t.Helper()
	if len(want) > 0 && want[0] == '"' {
		d := decode[string](t, want)
		if digest(got) != d {
			return fmt.Sprintf("digest differs (len %d)", len(got)), false
		}
		return "", true
	}
	w := decode[[]int](t, want)
	if !slices.Equal(got, w) {
		return fmt.Sprintf("got %s\nwant %s", short(got), short(w)), false
	}
	return "", true
}

// short prints at most the first 40 elements.
func short(v []int) string {
	if len(v) > 40 {
		return fmt.Sprintf("%v... (len %d)", v[:40], len(v))
	}
	return fmt.Sprint(v)
}

// TestOracleVersions records which releases the comparisons ran against.
func TestOracleVersions(t *testing.T) {
	a := oracle(t, []request{{"op": "version"}}, false)
	t.Logf("compared against %s", a[0])
}
