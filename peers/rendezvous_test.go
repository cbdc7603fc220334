package peers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mode is the permission bits of path (not following a symlink).
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// noTemps fails if a temporary file was left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(dir + "/" + tmpPrefix + "*")
	if len(names) > 0 {
		t.Errorf("temporary files left: %v", names)
	}
}

func TestRendezvousMeets(t *testing.T) {
	dir := t.TempDir() + "/rdv"
	const n = 4
	got := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := OpenRendezvous(dir, "job-1", n)
			if err == nil {
				err = r.Announce(i, fmt.Sprintf("127.0.0.%d:%d", i+1, 7000+i))
			}
			if err == nil {
				got[i], err = r.Await(context.Background(), 5*time.Second)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	want := []string{"127.0.0.1:7000", "127.0.0.2:7001", "127.0.0.3:7002", "127.0.0.4:7003"}
	for i := range n {
		if errs[i] != nil || !slices.Equal(got[i], want) {
			t.Errorf("node %d: %v, %v; want %v", i, got[i], errs[i], want)
		}
	}
	job := dir + "/job-1"
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("%s mode %v", dir, m)
	}
	if m := mode(t, job); m != 0o700 {
		t.Errorf("%s mode %v", job, m)
	}
	if m := mode(t, job+"/node-2"); m != 0o600 {
		t.Errorf("node-2 mode %v", m)
	}
	noTemps(t, job)
}

func TestAnnounceReplaces(t *testing.T) {
	r, err := OpenRendezvous(t.TempDir(), "j", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		if err := r.Announce(1, a); err != nil {
			t.Fatal(err)
		}
	}
	addrs, err := r.Addrs()
	if err != nil || !slices.Equal(addrs, []string{"", "127.0.0.1:2"}) {
		t.Errorf("%q, %v", addrs, err)
	}
	for _, bad := range []struct {
		node int
		addr string
	}{{2, "127.0.0.1:1"}, {-1, "127.0.0.1:1"}, {0, "0.0.0.0:1"}, {0, "127.0.0.1:0"}} {
		if err := r.Announce(bad.node, bad.addr); err == nil {
			t.Errorf("Announce(%d, %q) accepted", bad.node, bad.addr)
		}
	}
}

func TestSecretIsCreatedOnce(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	secrets := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := OpenRendezvous(dir, "j", n)
			if err != nil {
				t.Error(err)
				return
			}
			if secrets[i], err = r.Secret(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(secrets[0]) != 64 {
		t.Fatalf("secret %q", secrets[0])
	}
	for i, s := range secrets {
		if s != secrets[0] {
			t.Errorf("node %d read another secret", i)
		}
	}
	if m := mode(t, dir+"/j/secret"); m != 0o600 {
		t.Errorf("secret mode %v", m)
	}
	noTemps(t, dir+"/j")
}

func TestRendezvousRefusesWhatIsNotOurs(t *testing.T) {
	base := t.TempDir()
	other := t.TempDir()
	if err := os.Symlink(other, base+"/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRendezvous(base, "link", 2); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symlinked job directory: %v", err)
	}
	os.Mkdir(base+"/open", 0o777)
	os.Chmod(base+"/open", 0o777)
	if _, err := OpenRendezvous(base, "open", 2); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable job directory: %v", err)
	}
	if _, err := OpenRendezvous(base, "a/b", 2); err == nil {
		t.Error("a job id with a slash accepted")
	}
}

func TestRendezvousRefusesBadEntries(t *testing.T) {
	r, err := OpenRendezvous(t.TempDir(), "j", 6)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Dir
	if err := r.Announce(0, "127.0.0.1:9"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(d+"/node-1", []byte("127.0.0.1:10\n"), 0o600)
	os.Chmod(d+"/node-1", 0o666) // anyone could have written it
	os.WriteFile(d+"/elsewhere", []byte("127.0.0.1:11\n"), 0o600)
	os.Symlink(d+"/elsewhere", d+"/node-2")
	syscall.Mkfifo(d+"/node-3", 0o600) // must not hang the reader
	os.WriteFile(d+"/node-4", []byte("not an address\n"), 0o600)
	want := []string{"node-1 is writable by group or others", "node-2: too many levels of symbolic links",
		"node-3 is not a regular file", `node-4: "not an address" is not host:port`, "node-5 is owned by uid 65534"}
	os.WriteFile(d+"/node-5", []byte("127.0.0.1:12\n"), 0o600)
	if !giveAway(d + "/node-5") {
		os.Remove(d + "/node-5")
		want = want[:4]
	}
	addrs, err := r.Addrs()
	if !slices.Equal(addrs, []string{"127.0.0.1:9", "", "", "", "", ""}) {
		t.Errorf("addresses %q", addrs)
	}
	for _, want := range want {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestSecretRefusedUnlessPrivate(t *testing.T) {
	cases := []struct {
		content string
		mode    os.FileMode
		want    string
	}{
		{strings.Repeat("s", 32), 0o640, "mode 0640 lets others read it"},
		{"short", 0o600, "has 5 characters"},
		{strings.Repeat("s", 2*maxEntry), 0o600, "too long"},
	}
	for _, tc := range cases {
		r, err := OpenRendezvous(t.TempDir(), "j", 2)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(r.Dir+"/secret", []byte(tc.content), 0o600)
		os.Chmod(r.Dir+"/secret", tc.mode)
		if s, err := r.Secret(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q mode %v: %q, %v; want an error saying %q", tc.content, tc.mode, s, err, tc.want)
		}
	}
}

func TestAwaitIsBounded(t *testing.T) {
	r, err := OpenRendezvous(t.TempDir(), "j", 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Announce(0, "127.0.0.1:1")
	start := time.Now()
	addrs, err := r.Await(context.Background(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "nodes [1 2] did not announce themselves within 300ms") {
		t.Errorf("error %v", err)
	}
	if !slices.Equal(addrs, []string{"127.0.0.1:1", "", ""}) {
		t.Errorf("addresses %q", addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := r.Await(ctx, time.Hour); err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("cancelled: %v", err)
	}
	if e := time.Since(start); e > 3*time.Second {
		t.Errorf("waited %v", e)
	}
}

// TestRendezvousChecksTheWholePath: a rendezvous directory that another
// user made first, or that sits in a directory others may write (not
// sticky), or below a symlink, or whose parent another user owns, is
// refused: someone else could put a job directory of their choosing
// there, or one of ours with stale addresses.
func TestRendezvousChecksTheWholePath(t *testing.T) {
	base := t.TempDir()
	for _, c := range []struct {
		name, dir, want string
		setup           func(dir string)
	}{
		{"made first by another user", base + "/theirs", "is owned by uid 65534", func(dir string) {
			os.Mkdir(dir, 0o777)
			os.Chmod(dir, 0o777)
			os.Chown(dir, 65534, 65534)
		}},
		{"ours, open to all", base + "/open", "is writable by group or others", func(dir string) {
			os.Mkdir(dir, 0o777)
			os.Chmod(dir, 0o777)
		}},
		{"in a directory all may write", base + "/shared/rdv", base + "/shared is writable by group or others and not sticky", func(string) {
			os.Mkdir(base+"/shared", 0o777)
			os.Chmod(base+"/shared", 0o777)
		}},
		{"below a symlink", base + "/via/rdv", base + "/via is a symbolic link", func(string) {
			os.Mkdir(base+"/real", 0o700)
			os.Symlink(base+"/real", base+"/via")
		}},
		{"in another user's directory", base + "/nobodys/rdv", base + "/nobodys is owned by uid 65534", func(string) {
			os.Mkdir(base+"/nobodys", 0o755)
			os.Chown(base+"/nobodys", 65534, 65534)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.want, "65534") && os.Geteuid() != 0 {
				t.Fatal("this case needs root, to give a directory to nobody")
			}
			c.setup(c.dir)
			_, err := OpenRendezvous(c.dir, "j", 2)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want an error saying %q", err, c.want)
			}
		})
	}
	sticky := base + "/sticky"
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	if _, err := OpenRendezvous(sticky+"/rdv", "j", 2); err != nil {
		t.Errorf("in a sticky directory all may write, as /tmp: %v", err)
	}
}
