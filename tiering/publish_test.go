package tiering

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fromSource makes a source file of data, mode 0640 and an old mtime in
// a new tier's source directory and returns the tier, the source's path
// and its stat, as a caller of PublishFrom takes it.
func fromSource(t *testing.T, data []byte) (*Tree, string, *unix.Stat_t) {
	t.Helper()
	tier, src := newTier(t, 1<<20)
	p := filepath.Join(src, "d", "f.bin")
	write(t, p, data)
	old := time.Date(2020, 1, 2, 3, 4, 5, 6789, time.UTC)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return tier, p, &st
}

// writing is a fill that writes data, as a peer's transfer would.
func writing(data []byte) func(*os.File) (int64, error) {
	return func(dst *os.File) (int64, error) {
		n, err := dst.Write(data)
		return int64(n), err
	}
}

// A copy filled from elsewhere is the source's in bytes, permission
// bits, times and identity, as a copy read from the source is.
func TestPublishFromCopiesBytesAndMetadata(t *testing.T) {
	data := bytes.Repeat([]byte("peer"), 3000)
	tier, p, st := fromSource(t, data)
	n, err := tier.PublishFrom(p, st, writing(data), nil)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("PublishFrom = %d, %v; want %d bytes", n, err, len(data))
	}
	cp, _ := CopyPath(tier.Path, p)
	if got, err := os.ReadFile(cp); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy content differs (%v)", err)
	}
	var cst unix.Stat_t
	if err := unix.Stat(cp, &cst); err != nil {
		t.Fatal(err)
	}
	if cst.Mode&0o7777 != 0o640 || cst.Mtim != st.Mtim || cst.Size != st.Size {
		t.Errorf("copy mode %o mtime %v size %d; want 0640 %v %d", cst.Mode&0o7777, cst.Mtim, cst.Size, st.Mtim, st.Size)
	}
	if id, ok := CopyIdent(cp); !ok {
		t.Errorf("the copy records no source identity")
	} else if id != IdentOf(st) {
		t.Errorf("source identity %+v, want %+v", id, IdentOf(st))
	}
	noTemp(t, tier)
}

// A fill that is not a whole copy of the source as stated, or fails, or
// meets a source that changed, publishes nothing and leaves no temporary
// file; a fill's own error is returned as it is.
func TestPublishFromRefuses(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	errPeer := errors.New("peer went away")
	cases := []struct {
		name string
		fill func(source string) func(*os.File) (int64, error)
		dir  bool // publish a directory's stat
		want error
	}{
		{name: "short", fill: func(string) func(*os.File) (int64, error) { return writing(data[:len(data)-1]) }, want: ErrIncomplete},
		{name: "long", fill: func(string) func(*os.File) (int64, error) { return writing(append(data, 'x')) }, want: ErrIncomplete},
		{name: "reports more than it wrote", fill: func(string) func(*os.File) (int64, error) {
			return func(dst *os.File) (int64, error) {
				dst.Write(data[:len(data)/2])
				return int64(len(data)), nil
			}
		}, want: ErrIncomplete},
		{name: "fails midway", fill: func(string) func(*os.File) (int64, error) {
			return func(dst *os.File) (int64, error) {
				n, _ := dst.Write(data[:len(data)/2])
				return int64(n), errPeer
			}
		}, want: errPeer},
		{name: "source touched during fill", fill: func(source string) func(*os.File) (int64, error) {
			return func(dst *os.File) (int64, error) {
				now := time.Now()
				os.Chtimes(source, now, now) // same size, new mtime
				return writing(data)(dst)
			}
		}, want: ErrChanged},
		{name: "source grown during fill", fill: func(source string) func(*os.File) (int64, error) {
			return func(dst *os.File) (int64, error) {
				os.WriteFile(source, append(data, 'x'), 0o640)
				return writing(data)(dst)
			}
		}, want: ErrChanged},
		{name: "source removed during fill", fill: func(source string) func(*os.File) (int64, error) {
			return func(dst *os.File) (int64, error) {
				os.Remove(source)
				return writing(data)(dst)
			}
		}, want: unix.ENOENT},
		{name: "not a regular file", dir: true, fill: func(string) func(*os.File) (int64, error) {
			return func(*os.File) (int64, error) { panic("fill called for a directory") }
		}, want: ErrNotRegular},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tier, p, st := fromSource(t, data)
			if c.dir {
				p = filepath.Dir(p)
				Stat(p, st)
			}
			n, err := tier.PublishFrom(p, st, c.fill(p), nil)
			if !errors.Is(err, c.want) || n != 0 {
				t.Errorf("PublishFrom = %d, %v; want 0, %v", n, err, c.want)
			}
			var te *TierError
			if errors.As(err, &te) {
				t.Errorf("%v counted as the tier's failure", err)
			}
			cp, _ := CopyPath(tier.Path, p)
			if _, err := os.Lstat(cp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a copy was published (%v)", err)
			}
			noTemp(t, tier)
		})
	}
}

func noTemp(t *testing.T, tier *Tree) {
	t.Helper()
	if entries, _ := os.ReadDir(filepath.Join(tier.Path, tmpDir)); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// A source opened uncached (O_DIRECT where the filesystem allows it) is
// copied byte for byte whatever its size: the reads ask for whole pages
// and the last one comes back short at EOF. On a filesystem that refuses
// O_DIRECT (tmpfs before Linux 6.6) it is read through the cache.
func TestPublishUncachedSourceOfEverySize(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		tr, _ := newTier(t, 1<<30)
		for _, size := range []int{0, 1, 511, 4096, 4097, 100000, copyPart, copyPart + 1, 2*copyPart + 4095,
			copyStreams*copyPart + 1, copyBuf, copyBuf + 1, 3*copyBuf - 5} {
			f, err := os.CreateTemp(dir, "src-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.Remove(f.Name())
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i*7 + size)
			}
			if _, err := f.Write(want); err != nil {
				t.Fatal(err)
			}
			f.Close()
			src, err := OpenSourceUncached(f.Name())
			if err != nil {
				t.Fatalf("%s, %d bytes: %v", dir, size, err)
			}
			n, err := tr.PublishSource(f.Name(), src)
			src.File.Close()
			if err != nil || n != int64(size) {
				t.Fatalf("%s, %d bytes (direct %v): published %d, %v", dir, size, src.Direct, n, err)
			}
			cp, _ := CopyPath(tr.Path, f.Name())
			if got, _ := os.ReadFile(cp); !bytes.Equal(got, want) {
				t.Fatalf("%s, %d bytes (direct %v): the copy differs", dir, size, src.Direct)
			}
			if size == 0 {
				t.Logf("%s: read with O_DIRECT: %v", dir, src.Direct)
			}
		}
	}
}

// A Commit decides whether the finished copy goes in place: one that
// refuses leaves no copy, one that renames and takes the copy back
// leaves none either, both leave no temporary file and return the
// Commit's error, and a waiting reader is let in only after a copy kept.
func TestCommitPutsTheCopyInPlace(t *testing.T) {
	data := bytes.Repeat([]byte("commit"), 1000)
	refused := errors.New("changed")
	cases := []struct {
		name   string
		commit Commit
		err    error
	}{
		{"none", nil, nil},
		{"renames", func(_ *unix.Stat_t, rename func() error, _ func()) error { return rename() }, nil},
		{"refuses", func(*unix.Stat_t, func() error, func()) error { return refused }, refused},
		{"takes-back", func(_ *unix.Stat_t, rename func() error, remove func()) error {
			if err := rename(); err != nil {
				return err
			}
			remove()
			return refused
		}, refused},
	}
	for _, c := range cases {
		for _, waited := range []bool{false, true} {
			tier, p, _ := fromSource(t, data)
			src, err := OpenSource(p)
			if err != nil {
				t.Fatal(err)
			}
			src.Commit = c.commit
			placed := false
			if waited {
				src.Placed = func() { placed = true }
			}
			n, err := tier.PublishSource(p, src)
			src.File.Close()
			cp, _ := CopyPath(tier.Path, p)
			_, serr := os.Stat(cp)
			if err != c.err || (err == nil) != (serr == nil) || (err == nil && n != int64(len(data))) {
				t.Errorf("%s (waited %v): PublishSource = %d, %v, copy %v; want %v and a copy only without error", c.name, waited, n, err, serr, c.err)
			}
			if waited && placed != (c.err == nil) {
				t.Errorf("%s: the waiting reader let in: %v, want %v", c.name, placed, c.err == nil)
			}
			noTemp(t, tier)
		}
	}
}

// A reader's tee is published by moving it into the tier where both are
// on one filesystem (the copy is the tee's inode, cut to the source's
// size: what follows it, the tee's header, is gone), and by a copy where
// they are not; either way the tee's name is gone and the copy carries
// the source's bytes, mode and times.
func TestPublishFileMovesOrCopiesTheTee(t *testing.T) {
	data := bytes.Repeat([]byte("tee!"), 5000)
	for _, teeDir := range []string{"", "/dev/shm"} { // "": the tier's filesystem
		tier, p, st := fromSource(t, data)
		dir := teeDir
		if dir == "" {
			dir = filepath.Dir(tier.Path)
		}
		dir, err := os.MkdirTemp(dir, "tee")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		name := filepath.Join(dir, "1.1")
		write(t, name, append(append([]byte{}, data...), []byte("header")...))
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var tst unix.Stat_t
		unix.Fstat(int(f.Fd()), &tst)
		dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dirfd)
		n, err := tier.PublishFile(p, st, false, dirfd, "1.1", f, nil)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("tee in %s: PublishFile = %d, %v; want %d bytes", dir, n, err, len(data))
		}
		cp, _ := CopyPath(tier.Path, p)
		var cst unix.Stat_t
		if got, err := os.ReadFile(cp); err != nil || !bytes.Equal(got, data) || unix.Stat(cp, &cst) != nil {
			t.Fatalf("tee in %s: the copy is not the source's bytes (%v)", dir, err)
		}
		moved := cst.Ino == tst.Ino && cst.Dev == tst.Dev
		if same := tst.Dev == tier.dev; moved != same {
			t.Errorf("tee in %s: moved %v, want %v (one filesystem: %v)", dir, moved, same, same)
		}
		if cst.Mode&0o7777 != 0o640 || cst.Mtim != st.Mtim {
			t.Errorf("tee in %s: copy mode %o mtime %v; want 0640 %v", dir, cst.Mode&0o7777, cst.Mtim, st.Mtim)
		}
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("tee in %s: the tee's name is still there (%v)", dir, err)
		}
		noTemp(t, tier)
	}
}

// BenchmarkPublishAndRemove is a staged copy's life in the tier: a small
// file published to a RAM tier, then removed once read (go test -run X
// -bench PublishAndRemove ./tiering; strace -c counts its system calls).
func BenchmarkPublishAndRemove(b *testing.B) {
	ram, err := os.MkdirTemp("/dev/shm", "augur-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ram)
	tr, err := Open(Tier{Path: ram + "/tier", Capacity: 1 << 30, Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	src := b.TempDir()
	var paths []string
	for i := 0; i < 1000; i++ {
		p := filepath.Join(src, "class", fmt.Sprintf("f%d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 500), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := paths[i%len(paths)]
		if _, err := tr.Publish(p); err != nil {
			b.Fatal(err)
		}
		if err := tr.Remove(p); err != nil {
			b.Fatal(err)
		}
	}
}
