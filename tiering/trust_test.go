package tiering

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests plant what another user of the node could: tiers, files/ or
// tmp/ that are theirs, writable by all, symlinks to the victim's own
// files. They need root (chown to nobody, a read-only mount).

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test plants another user's files (chown) and must run as root")
	}
}

// victimFiles makes a directory of the victim's own files shaped like a
// tier (files/, tmp/, lock), which a symlinked tier would lead augur into,
// and returns a snapshot function: it fails the test if anything there
// changed.
func victimFiles(t *testing.T) (string, func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "victim")
	for _, p := range []string{"files/precious@/a", "tmp/copy-1", "lock", "files/x"} {
		write(t, filepath.Join(dir, p), []byte("precious "+p))
	}
	before := snapshot(t, dir)
	return dir, func() {
		t.Helper()
		if after := snapshot(t, dir); after != before {
			t.Errorf("files outside the tier changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
}

// snapshot lists every path under dir with its mode, owner and content.
func snapshot(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		unix.Lstat(p, &st)
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %o %d %q\n", p, st.Mode, st.Uid, data)
		return nil
	})
	return b.String()
}

func TestOpenRefusesWhatIsNotTheUsersOwn(t *testing.T) {
	needRoot(t)
	victim, unchanged := victimFiles(t)
	cases := []struct {
		name  string
		setup func(tier string)
		want  string // the exact error; %s is the tier
	}{
		{"symlink-to-victim", func(tier string) { must(t, os.Symlink(victim, tier)) },
			"tier %[1]s: %[1]s is a symbolic link to " + victim + " (owner uid 0 (root), mode 0777)"},
		{"other-owner", func(tier string) {
			must(t, os.Mkdir(tier, 0o700))
			must(t, os.Chown(tier, nobody, nobody))
		}, "tier %[1]s: %[1]s is owned by uid 65534 (nobody), not by you (uid 0 (root)); mode 0700"},
		{"world-writable", func(tier string) {
			must(t, os.Mkdir(tier, 0o700))
			must(t, unix.Chmod(tier, 0o1777))
		}, "tier %[1]s: %[1]s is writable by group or others (owner uid 0 (root), mode 1777)"},
		{"group-writable-files", func(tier string) {
			must(t, os.MkdirAll(tier+"/files", 0o700))
			must(t, os.Chmod(tier+"/files", 0o770))
		}, "tier %[1]s: %[1]s/files is writable by group or others (owner uid 0 (root), mode 0770)"},
		{"files-symlink", func(tier string) {
			must(t, os.Mkdir(tier, 0o700))
			must(t, os.Symlink(victim+"/files", tier+"/files"))
		}, "tier %[1]s: %[1]s/files is a symbolic link to " + victim + "/files (owner uid 0 (root), mode 0777)"},
		{"tmp-other-owner", func(tier string) {
			must(t, os.MkdirAll(tier+"/tmp", 0o700))
			must(t, os.Chown(tier+"/tmp", nobody, nobody))
		}, "tier %[1]s: %[1]s/tmp is owned by uid 65534 (nobody), not by you (uid 0 (root)); mode 0700"},
		{"a-file", func(tier string) { write(t, tier, []byte("x")) },
			"tier %[1]s: %[1]s is not a directory (owner uid 0 (root), mode 0640)"},
		{"missing-parent", func(string) {},
			"tier %[1]s: parent directory %[2]s does not exist (augur creates only the tier's own directory)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tier := filepath.Join(t.TempDir(), "tier")
			parent := filepath.Dir(tier)
			if c.name == "missing-parent" {
				parent = filepath.Join(parent, "nosuch")
				tier = filepath.Join(parent, "tier")
			}
			c.setup(tier)
			tr, err := Open(Tier{Path: tier, Capacity: 1 << 20})
			if err == nil {
				tr.Close()
				t.Fatal("Open accepted it")
			}
			if want := fmt.Sprintf(c.want, tier, parent); err.Error() != want {
				t.Errorf("Open:\n got %s\nwant %s", err, want)
			}
			if c.name == "missing-parent" {
				if _, err := os.Stat(parent); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the missing parent was created: %v", err)
				}
			}
		})
	}
	unchanged()
}

func TestOpenRefusesReadOnlyFilesystem(t *testing.T) {
	needRoot(t)
	mnt := t.TempDir()
	must(t, os.Mkdir(filepath.Join(mnt, "x"), 0o700)) // hidden by the mount
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	must(t, os.MkdirAll(filepath.Join(mnt, "tier", "files"), 0o700))
	must(t, unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	for _, tier := range []string{filepath.Join(mnt, "tier"), filepath.Join(mnt, "new")} {
		_, err := Open(Tier{Path: tier})
		if want := "tier " + tier + ": on a read-only filesystem"; err == nil || err.Error() != want {
			t.Errorf("Open(%s) = %v, want %q", tier, err, want)
		}
	}
}

func TestOpenCreatesPrivateDirectories(t *testing.T) {
	tr, src := newTier(t, 1<<20)
	p := filepath.Join(src, "d", "e", "f.bin")
	write(t, p, []byte("augur"))
	must(t, os.Chmod(p, 0o666))
	must(t, os.Chmod(filepath.Dir(p), 0o777))
	if _, err := tr.Publish(p); err != nil {
		t.Fatal(err)
	}
	cp, _ := CopyPath(tr.Path, p)
	for d := filepath.Dir(cp); d != filepath.Dir(tr.Path); d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Errorf("%s: %v, mode %v; want a directory of mode 0700", d, err, fi.Mode())
		}
	}
	if fi, _ := os.Stat(cp); fi.Mode().Perm() != 0o644 {
		t.Errorf("copy of a 0666 file has mode %v, want 0644 (no one else may write a copy)", fi.Mode().Perm())
	}
}

// TestWalksNeverLeaveTheTier swaps a directory of the tier for a symlink
// to the victim's files just before each walk enters it: validation,
// clean, usage and removal must neither follow it nor touch its target.
func TestWalksNeverLeaveTheTier(t *testing.T) {
	needRoot(t)
	victim, unchanged := victimFiles(t)
	for _, op := range []string{"validate", "check", "clear", "usage", "remove"} {
		t.Run(op, func(t *testing.T) {
			tr, src := newTier(t, 1<<20)
			var files []string
			for _, rel := range []string{"a/x", "a/y", "b/z"} {
				p := filepath.Join(src, rel)
				write(t, p, []byte(rel))
				if _, err := tr.Publish(p); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
			}
			write(t, filepath.Join(tr.Path, tmpDir, "copy-crashed"), []byte("partial"))
			dirA, _, _ := copyRel(files[0])
			swapped := false
			swap := func(rel string) {
				if rel == dirA && !swapped {
					swapped = true
					must(t, os.Rename(filepath.Join(tr.Path, rel), filepath.Join(tr.Path, rel)+".away"))
					must(t, os.Symlink(victim+"/files/precious@", filepath.Join(tr.Path, rel)))
				}
			}
			enterHook = swap
			defer func() { enterHook = nil }()
			switch op {
			case "validate":
				rep := tr.Validate()
				if len(rep.Errors) == 0 {
					t.Error("Validate reported no error for the swapped directory")
				}
			case "check":
				tr.Check()
			case "clear":
				if err := tr.Clear(); err == nil {
					t.Error("Clear reported no error for the swapped directory")
				}
			case "usage":
				if u := tr.Usage(); u.Files != 1 {
					t.Errorf("Usage counted %d files past the swap, want the 1 not behind it", u.Files)
				}
			case "remove":
				swap(dirA)
				if err := tr.Remove(files[0]); err == nil {
					t.Error("Remove went through a symlink")
				}
			}
			if !swapped {
				t.Fatal("the walk never entered the directory to swap")
			}
		})
	}
	unchanged()
}

// TestCheckRemovesWhatIsNotOurs: files under files/ that the user does not
// own, or that are writable by others, or that are symlinks, are no copy
// augur made; Check removes them (a symlink as a link only) and Lookup
// never reports them.
func TestCheckRemovesWhatIsNotOurs(t *testing.T) {
	needRoot(t)
	victim, unchanged := victimFiles(t)
	tr, src := newTier(t, 1<<20)
	var files []string
	for _, name := range []string{"planted", "writable", "link", "good"} {
		p := filepath.Join(src, name)
		write(t, p, []byte(name))
		if _, err := tr.Publish(p); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	cp := func(i int) string { p, _ := CopyPath(tr.Path, files[i]); return p }
	must(t, os.Chown(cp(0), nobody, nobody))
	must(t, os.Chmod(cp(1), 0o666))
	must(t, os.Remove(cp(2)))
	must(t, os.Symlink(victim+"/files/x", cp(2)))
	for i := 0; i < 3; i++ {
		var st unix.Stat_t
		unix.Stat(files[i], &st)
		if got := Lookup([]*Tree{tr}, files[i], &st); got != -1 {
			t.Errorf("Lookup(%s) = %d, want -1", files[i], got)
		}
	}
	rep := tr.Check()
	if rep.Stale != 3 || rep.Files != 1 {
		t.Errorf("Check = %+v, want 3 removed and 1 kept", rep)
	}
	for i := 0; i < 3; i++ {
		if _, err := os.Lstat(cp(i)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived Check", cp(i))
		}
	}
	if got, _ := os.ReadFile(cp(3)); !bytes.Equal(got, []byte("good")) {
		t.Errorf("the good copy holds %q", got)
	}
	unchanged()
}

func TestLockRefusesAnotherUsersLockFile(t *testing.T) {
	needRoot(t)
	tr, _ := newTier(t, 1)
	lock := filepath.Join(tr.Path, lockName)
	write(t, lock, nil)
	must(t, os.Chown(lock, nobody, nobody))
	_, err := tr.TryLock()
	want := lock + " is owned by uid 65534 (nobody), not by you (uid 0 (root)); mode 0640"
	if err == nil || err.Error() != want {
		t.Errorf("TryLock = %v, want %q", err, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
