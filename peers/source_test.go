package peers

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatSource: a source is the dataset's own file only if reached
// from the root without a symlink and with one name, with openat2 and
// with the walk that stands in for it on older kernels.
func TestStatSource(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(outside+"/secret", []byte("s"), 0o600)
	os.MkdirAll(root+"/d", 0o755)
	os.WriteFile(root+"/d/plain", []byte("p"), 0o644)
	os.Symlink(outside+"/secret", root+"/d/link")
	os.Symlink(outside, root+"/dirlink")
	os.Link(outside+"/secret", root+"/d/hard")
	unix.Mkfifo(root+"/d/fifo", 0o600)
	cases := map[string]error{
		"d/plain":         nil,
		"d/link":          ErrLinked,
		"dirlink/secret":  ErrLinked,
		"d/hard":          ErrLinked,
		"d/fifo":          ErrLinked,
		"d/none":          unix.ENOENT,
		"d/plain/x":       unix.ENOTDIR,
		"dirlink/missing": ErrLinked,
	}
	for _, walk := range []bool{false, true} {
		noOpenat2.Store(walk)
		for rel, want := range cases {
			var st unix.Stat_t
			if err := statSource(root, rel, &st); !errors.Is(err, want) && !(want == nil && err == nil) {
				t.Errorf("walk %v: %s: %v; want %v", walk, rel, err, want)
			}
		}
	}
	noOpenat2.Store(false)
}

// TestStatSourceFindsTheRoot: StatSource checks a path below whichever
// root holds it, lexically, and refuses one below none.
func TestStatSourceFindsTheRoot(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(root+"/d", 0o755)
	os.WriteFile(root+"/d/plain", []byte("p"), 0o644)
	os.Symlink(root+"/d/plain", root+"/d/link")
	var st unix.Stat_t
	if err := StatSource([]string{"/nowhere", root}, root+"/d//plain", &st); err != nil || st.Size != 1 {
		t.Errorf("a plain file: %v", err)
	}
	if err := StatSource([]string{root}, root+"/d/link", &st); !errors.Is(err, ErrLinked) {
		t.Errorf("a symlink: %v", err)
	}
	if err := StatSource([]string{root + "/d"}, root+"/e", &st); err == nil {
		t.Error("a path below no root accepted")
	}
}
