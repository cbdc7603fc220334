package tiering

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testBlockShift and testPageShift make blocks of 16 pages of 4 KiB, for
// small files here.
const testBlockShift, testPageShift = 16, 12

func TestPagesRoundTrip(t *testing.T) {
	words := []uint64{PageWord, 0, 0xf0, PageWord, 1 << 63, 0}
	got, ok := decodePages(encodePages(words, testBlockShift, testPageShift, true), len(words), testBlockShift, testPageShift)
	if !ok || !equalWords(got, words) {
		t.Fatalf("round trip: %x, %v; want %x", got, ok, words)
	}
	wholeOnly := []uint64{PageWord, 0, 0, PageWord, 0, 0}
	got, ok = decodePages(encodePages(words, testBlockShift, testPageShift, false), len(words), testBlockShift, testPageShift)
	if !ok || !equalWords(got, wholeOnly) {
		t.Fatalf("without partial blocks: %x, %v; want %x", got, ok, wholeOnly)
	}
	enc := encodePages(words, testBlockShift, testPageShift, true)
	for name, bad := range map[string][]byte{
		"empty":         nil,
		"other magic":   append([]byte("augurpg0"), enc[8:]...),
		"other blocks":  append(append([]byte{}, enc[:8]...), append([]byte{testBlockShift + 1}, enc[9:]...)...),
		"cut":           enc[:len(enc)-1],
		"one more byte": append(append([]byte{}, enc...), 0),
	} {
		if _, ok := decodePages(bad, len(words), testBlockShift, testPageShift); ok {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, ok := decodePages(enc, len(words)+1, testBlockShift, testPageShift); ok {
		t.Error("a map of 6 blocks decoded as one of 7")
	}
}

func equalWords(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// keptBlocksFile makes source's blocks file in tr with data's blocks
// whose word in words is not 0 written, and saves words on it.
func keptBlocksFile(t *testing.T, tr *Tree, source string, data []byte, words []uint64) string {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(source, &st))
	if _, err := tr.Blocks(source, &st); err != nil {
		t.Fatal(err)
	}
	f, err := tr.OpenBlocks(source)
	must(t, err)
	defer f.Close()
	for b, w := range words {
		if w != 0 {
			at := int64(b) << testBlockShift
			_, err := f.WriteAt(data[at:min(at+1<<testBlockShift, int64(len(data)))], at)
			must(t, err)
		}
	}
	must(t, tr.SaveBlocks(f, words, testBlockShift, testPageShift))
	return f.Name()
}

// A blocks file kept from a job is handed over with its map while its
// source stands, with the blocks no map claims punched out; one whose
// source changed, or with no map, is removed.
func TestKeptBlocks(t *testing.T) {
	tr, src := newTier(t, 1<<30)
	data := bytes.Repeat([]byte("0123456789abcdef"), 6<<12) // 6 blocks
	kept, changed, bare := filepath.Join(src, "kept"), filepath.Join(src, "changed"), filepath.Join(src, "bare")
	for _, p := range []string{kept, changed, bare} {
		write(t, p, data)
	}
	words := []uint64{PageWord, 0, 0x0ff0, 0, 0, PageWord}
	keptPath := keptBlocksFile(t, tr, kept, data, words)
	keptBlocksFile(t, tr, changed, data, words)
	var st unix.Stat_t
	must(t, unix.Stat(bare, &st))
	if _, err := tr.Blocks(bare, &st); err != nil {
		t.Fatal(err)
	}
	// Pages no map claims: block 3 written after the save (a leader
	// killed before its next one).
	f, err := os.OpenFile(keptPath, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(data[3<<testBlockShift:4<<testBlockShift], 3<<testBlockShift)
	must(t, err)
	f.Close()
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(changed, later, later))

	got := map[string][]uint64{}
	rep := tr.KeptBlocks(testBlockShift, testPageShift, func(source string, s *unix.Stat_t, w []uint64) bool {
		got[source] = w
		return true
	})
	if len(got) != 1 || !equalWords(got[kept], words) {
		t.Fatalf("kept %v; want only %s with %x", got, kept, words)
	}
	if rep.Files != 1 || rep.Stale != 2 {
		t.Errorf("report: %d kept, %d removed; want 1, 2", rep.Files, rep.Stale)
	}
	for _, p := range []string{changed, bare} {
		if bp, _ := BlockPath(tr.Path, p); exists(bp) {
			t.Errorf("%s's blocks file was kept", p)
		}
	}
	var bst unix.Stat_t
	must(t, unix.Stat(keptPath, &bst))
	b, err := os.ReadFile(keptPath)
	must(t, err)
	hole := make([]byte, 1<<testBlockShift)
	if !bytes.Equal(b[3<<testBlockShift:4<<testBlockShift], hole) || !bytes.Equal(b[:1<<testBlockShift], data[:1<<testBlockShift]) {
		t.Error("the block no map claims was not punched out, or a claimed one was")
	}

	// A keeper that does not take a file has it removed.
	tr.KeptBlocks(testBlockShift, testPageShift, func(string, *unix.Stat_t, []uint64) bool { return false })
	if exists(keptPath) {
		t.Error("a blocks file the keeper refused was kept")
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
