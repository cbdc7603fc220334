package test

// Another user of the node attacks a victim's job (issue 10): a copy
// planted in the victim's default tier, the tier a symlink to the victim's
// own files, the job's state in /dev/shm taken first, a tier lock held.
// Both sides are ordinary users: the victim is one made for these tests
// (useradd), the attacker is nobody. In every case no planted byte may be
// served, no file outside the victim's tier may change, and the victim's
// programs must run, unaccelerated where they must, with one message.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
	"github.com/augur-hpc/augur/tiering"
)

// victimAccount is the unprivileged user whose jobs are attacked, made
// for the test and removed after it.
func victimAccount(t *testing.T) account {
	t.Helper()
	const name = "augur-victim"
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--user-group",
			"--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
	}
	u, err := user.Lookup(name)
	must(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{uid, gid, name}
}

// attacker is the other user of the node.
var attacker = nobody

// victimWorld is a victim with a dataset file and augur's defaults: no
// tier configured, so the RAM tier is /dev/shm/augur-<uid> and the disk
// tier $TMPDIR/augur-<uid>, names anyone can predict.
type victimWorld struct {
	*Case
	v         account
	data      []byte
	file      string
	ram, disk string
}

func newVictimWorld(t *testing.T) *victimWorld {
	t.Helper()
	c := NewCase(t)
	openUp(t, c)
	v := victimAccount(t)
	w := &victimWorld{Case: c, v: v, data: randomBytes(40_000)}
	w.file = c.Write("a.bin", w.data)
	tmp := filepath.Join(c.Dir, "victim-tmp")
	must(t, os.Mkdir(tmp, 0o700))
	must(t, os.Chown(tmp, v.uid, v.gid))
	w.ram = fmt.Sprintf("/dev/shm/augur-%d", v.uid)
	w.disk = filepath.Join(tmp, fmt.Sprintf("augur-%d", v.uid))
	os.RemoveAll(w.ram) // a previous run's
	t.Cleanup(func() {
		os.RemoveAll(w.ram)
		jobs, _ := filepath.Glob(fmt.Sprintf("/dev/shm/augur.%d.*", v.uid)) // the victim's commands' jobs
		for _, j := range jobs {
			os.RemoveAll(j)
		}
	})
	c.Env = []string{"AUGUR_DATASET=" + c.Dataset, "TMPDIR=" + tmp, "AUGUR_LOG=warn"}
	return w
}

// attack runs a shell script as the attacker.
func (w *victimWorld) attack(script string) {
	w.T.Helper()
	a := attacker.argv(false, "sh", "-ec", "umask 0; "+script)
	if out, err := exec.Command(a[0], a[1:]...).CombinedOutput(); err != nil {
		w.T.Fatalf("attack %q: %v\n%s", script, err, out)
	}
}

// plant writes, as the attacker, a file of the source's size and times
// at path, full of 'P'.
func (w *victimWorld) plant(path string) {
	w.T.Helper()
	w.attack(fmt.Sprintf("mkdir -p %q && head -c %d /dev/zero | tr '\\0' P > %q && touch -r %q %q && chmod -R a+rwX %q",
		filepath.Dir(path), len(w.data), path, w.file, path, filepath.Dir(path)))
}

// victimRuns runs args as the victim (preloaded when preload is set) and
// checks that it printed the dataset file's bytes, exited as wantErr
// says, and that augur said exactly one thing, matching want.
func (w *victimWorld) victimRuns(preload bool, want *regexp.Regexp, args ...string) Result {
	w.T.Helper()
	a := w.v.argv(preload, args...)
	r := w.RunPlain(time.Minute, a[0], a[1:]...)
	if r.Err != nil || r.Stdout != string(w.data) {
		w.T.Errorf("%v: %v, printed %d bytes (%q...), want the file's %d\nstderr:\n%s",
			args, r.Err, len(r.Stdout), head(r.Stdout), len(w.data), r.Stderr)
	}
	if lines := augurLines(r.Stderr); len(lines) != 1 || !want.MatchString(lines[0]) {
		w.T.Errorf("%v: augur said %q, want one line matching %q", args, lines, want)
	}
	return r
}

// victimAugur runs the augur command as the victim.
func (w *victimWorld) victimAugur(args ...string) (string, error) {
	a := w.v.argv(false, append([]string{Augur}, args...)...)
	cmd := exec.Command(a[0], a[1:]...)
	cmd.Env = append(os.Environ(), w.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func head(s string) string { return s[:min(len(s), 16)] }

// exactly makes a regexp that matches s literally.
func exactly(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }

// TestAttackPlantedCopy: the attacker takes the name of the victim's
// default RAM tier first and plants a copy of the victim's file there
// with the source's size and mtime (once `cat` printed the planted bytes).
// Also a tier the victim made writable by all, with a copy planted in it.
func TestAttackPlantedCopy(t *testing.T) {
	for _, setup := range []string{"attackers-tier", "world-writable-tier"} {
		t.Run(setup, func(t *testing.T) {
			w := newVictimWorld(t)
			cp, err := tiering.CopyPath(w.ram, w.file)
			must(t, err)
			var why string
			switch setup {
			case "attackers-tier":
				w.plant(cp)
				why = fmt.Sprintf("tier %[1]s: %[1]s is owned by uid 65534 (nobody), not by you (uid %[2]d (%[3]s)); mode 0777; tier not used",
					w.ram, w.v.uid, w.v.name)
			case "world-writable-tier":
				must(t, os.Mkdir(w.ram, 0o700))
				must(t, os.Chown(w.ram, w.v.uid, w.v.gid))
				must(t, exec.Command("chmod", "1777", w.ram).Run())
				w.plant(cp)
				why = fmt.Sprintf("tier %[1]s: %[1]s is writable by group or others (owner uid %[2]d (%[3]s), mode 1777); tier not used",
					w.ram, w.v.uid, w.v.name)
			}
			planted := snapshotTree(t, w.ram)
			obs := Observe(t, w.ram)
			w.victimRuns(true, exactly("augur: "+why), "cat", w.file)
			w.victimRuns(true, exactly("augur: "+why), Python, "-c",
				"import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", w.file)
			out, err := w.victimAugur("warm")
			if err != nil || !strings.Contains(out, why) || !strings.Contains(out, w.disk+": copied 1 files") {
				t.Errorf("augur warm: %v\n%s\nwant it to refuse the RAM tier and fill the disk tier", err, out)
			}
			w.victimRuns(true, exactly("augur: "+why), "cat", w.file)
			w.victimRuns(false, exactly("augur: "+why), Augur, "run", "--", "cat", w.file)
			out, err = w.victimAugur("clean")
			if err == nil || !strings.Contains(out, why) {
				t.Errorf("augur clean: %v\n%s\nwant it to refuse the RAM tier", err, out)
			}
			obs.Stop()
			if n := obs.Opens(cp); n != 0 {
				t.Errorf("the planted copy was opened %d times", n)
			}
			if after := snapshotTree(t, w.ram); after != planted {
				t.Errorf("the attacker's tier changed:\nbefore:\n%s\nafter:\n%s", planted, after)
			}
		})
	}
}

// TestAttackSymlinkedTier: the victim's default RAM tier is a symlink to
// a directory of the victim's own, shaped like a tier and holding a file
// of the victim's where the copy would be. Following it would serve that
// file and let validation and clean remove the victim's files.
func TestAttackSymlinkedTier(t *testing.T) {
	w := newVictimWorld(t)
	home := filepath.Join(w.Dir, "victim-home")
	for _, rel := range []string{"lock", "tmp/copy-keep", "notes.txt"} {
		p := filepath.Join(home, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte("precious "+rel), 0o600))
	}
	own, err := tiering.CopyPath(home, w.file)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(own), 0o700))
	must(t, os.WriteFile(own, bytes.Repeat([]byte("V"), len(w.data)), 0o600))
	st, err := os.Stat(w.file)
	must(t, err)
	must(t, os.Chtimes(own, st.ModTime(), st.ModTime()))
	must(t, exec.Command("chown", "-R", fmt.Sprintf("%d:%d", w.v.uid, w.v.gid), home).Run())
	w.attack(fmt.Sprintf("ln -s %q %q", home, w.ram))
	before := snapshotTree(t, home)

	why := fmt.Sprintf("tier %[1]s: %[1]s is a symbolic link to %[2]s (owner uid 65534 (nobody), mode 0777); tier not used", w.ram, home)
	w.victimRuns(true, exactly("augur: "+why), "cat", w.file)
	if out, err := w.victimAugur("warm"); err != nil || !strings.Contains(out, why) {
		t.Errorf("augur warm: %v\n%s", err, out)
	}
	w.victimRuns(false, exactly("augur: "+why), Augur, "run", "--", "cat", w.file)
	if out, _ := w.victimAugur("clean"); !strings.Contains(out, "is a symbolic link") {
		t.Errorf("augur clean did not refuse the symlinked tier:\n%s", out)
	}
	if after := snapshotTree(t, home); after != before {
		t.Errorf("the victim's files changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestAttackPlantedJobState: the attacker runs a job of its own whose
// segment publishes its own tier (holding a planted copy) and whose
// leader lives, and puts hard links to that segment and lock where the
// victim's job "train1" keeps its state, or only a directory of its own
// there. The victim's job never attaches to it: one message, and the
// original's bytes.
func TestAttackPlantedJobState(t *testing.T) {
	for _, mode := range []string{"0777", "0700"} {
		t.Run("dir-"+mode, func(t *testing.T) {
			w := newVictimWorld(t)
			evil := filepath.Join(w.Dir, "evil-tier")
			must(t, os.Mkdir(evil, 0o700))
			must(t, os.Chown(evil, attacker.uid, attacker.gid))
			cp, err := tiering.CopyPath(evil, w.file)
			must(t, err)
			w.attack(fmt.Sprintf("mkdir -m 0700 %q %q", evil+"/files", evil+"/tmp"))
			w.plant(cp)
			w.attack(fmt.Sprintf("chmod -R go-w %q", evil))
			job := "evil-" + randHex(4)
			t.Cleanup(func() { removeJobState(job) })
			a := attacker.argv(true, "sleep", "60")
			leader := exec.Command(a[0], a[1:]...)
			leader.Env = append(os.Environ(), "AUGUR_JOB="+job, "AUGUR_DATASET="+w.Dataset,
				"AUGUR_TIERS="+evil+":1GiB", "AUGUR_LOG=warn")
			must(t, leader.Start())
			t.Cleanup(func() { leader.Process.Kill(); leader.Wait() })
			evilState := fmt.Sprintf("/dev/shm/augur.%d.%s", attacker.uid, job)
			waitUntil(t, func() bool {
				a := attacker.argv(false, Augur, "stat", "--json", "--job", job)
				out, _ := exec.Command(a[0], a[1:]...).Output()
				return strings.Contains(string(out), `"ready": true`)
			})
			// The attacker's own job serves the planted copy, so the
			// segment below would make a victim that trusted it do so.
			victimJob := "train1-" + randHex(4)
			t.Cleanup(func() { removeJobState(victimJob) })
			state := fmt.Sprintf("/dev/shm/augur.%d.%s", w.v.uid, victimJob)
			w.attack(fmt.Sprintf("mkdir %q && ln %q %q && ln %q %q && chmod %s %q", state,
				evilState+"/segment", state+"/segment", evilState+"/leader", state+"/leader", mode, state))
			w.Set("AUGUR_JOB=" + victimJob)
			obs := Observe(t, evil)
			why := fmt.Sprintf("job state %s is owned by uid 65534 (nobody), not by you (uid %d (%s)); mode %s",
				state, w.v.uid, w.v.name, mode)
			w.victimRuns(true, exactly("augur: "+why+"; passing through"), "cat", w.file)
			w.victimRuns(true, exactly("augur: "+why+"; passing through"), Python, "-c",
				"import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", w.file)
			w.victimRuns(false, exactly("augur: "+why+"; running the command without augur"),
				Augur, "run", "--", "cat", w.file)
			obs.Stop()
			if n := obs.Opens(cp); n != 0 {
				t.Errorf("the planted copy was opened %d times", n)
			}
		})
	}
}

// TestAttackHeldTierLock: the victim's tier was made by hand (mode 0755)
// with a lock file anyone may read, as an older augur left it; the
// attacker opens the lock and holds a read lock on it, so the victim's
// leader cannot take the writer lock. The job runs, serving the tier's
// copies without writing, and says who holds the lock.
func TestAttackHeldTierLock(t *testing.T) {
	w := newVictimWorld(t)
	tier := filepath.Join(w.Dir, "victim-tier")
	must(t, os.Mkdir(tier, 0o755))
	must(t, os.WriteFile(filepath.Join(tier, "lock"), nil, 0o644))
	must(t, exec.Command("chown", "-R", fmt.Sprintf("%d:%d", w.v.uid, w.v.gid), tier).Run())
	w.Set("AUGUR_TIERS=" + tier + ":1GiB")
	a := attacker.argv(false, Python, "-c",
		"import fcntl, sys, time; f = open(sys.argv[1]); fcntl.lockf(f, fcntl.LOCK_SH); print('held', flush=True); time.sleep(60)",
		filepath.Join(tier, "lock"))
	holder := exec.Command(a[0], a[1:]...)
	stdout, err := holder.StdoutPipe()
	must(t, err)
	must(t, holder.Start())
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the attacker did not take the lock: %q %v", line, err)
	}
	why := regexp.MustCompile(regexp.QuoteMeta("augur: "+tier+": tier is locked by another process (pid ") +
		`\d+` + regexp.QuoteMeta(" of another user, uid 65534 (nobody)); serving its copies without writing"))
	w.victimRuns(true, why, "cat", w.file)
	w.victimRuns(false, why, Augur, "run", "--", "cat", w.file)
}

// TestJobStateIsPrivate: a job id made by the preload is 64 random bits,
// not a pid and a time, and the job's state is the user's alone.
func TestJobStateIsPrivate(t *testing.T) {
	c := NewCase(t)
	c.Set("AUGUR_JOB=")
	ids := map[string]bool{}
	for i := 0; i < 2; i++ {
		r := c.MustRun(time.Minute, "sh", "-c", `echo "$AUGUR_JOB $$"; cat "$1" > /dev/null`, "sh", c.Write("x", []byte("x")))
		f := strings.Fields(r.Stdout)
		if len(f) != 2 || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(f[0]) || strings.Contains(f[0], f[1]) {
			t.Fatalf("job id and pid %q: want 16 hex digits of randomness", r.Stdout)
		}
		ids[f[0]] = true
		t.Cleanup(func() { removeJobState(f[0]) })
		dir := fmt.Sprintf("/dev/shm/augur.%d.%s", os.Geteuid(), f[0])
		for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, dir + "/segment": 0o600, dir + "/leader": 0o600} {
			if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
				t.Errorf("%s: %v, mode %v, want %v", p, err, fi.Mode(), want)
			}
		}
	}
	if len(ids) != 2 {
		t.Errorf("two jobs got one id: %v", ids)
	}
}

// snapshotTree lists every path under dir with its mode, owner and
// content, to show that nothing there changed.
func snapshotTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		data := []byte(nil)
		if fi.Mode().IsRegular() {
			data, _ = os.ReadFile(p)
		}
		target, _ := os.Readlink(p)
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d %v %q %q\n", p, fi.Mode(), st.Uid, st.Gid, st.Size, fi.ModTime(), target, data)
		return nil
	})
	return b.String()
}

// waitUntil polls cond for up to 20 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 20s")
}

// TestDataPlaneServesOnlyOwnCopies: in a tier that is not sealed (its
// parent is writable by all and not sticky, so the tier can be swapped
// under a running job), the data plane checks each copy it opens: one that
// is not the user's own, or that others may write, is never served. Here
// the test, as root, puts such copies in the user's tier behind a live
// job; TestAttackSwappedTier is the attack itself.
func TestDataPlaneServesOnlyOwnCopies(t *testing.T) {
	c := NewCase(t)
	data := randomBytes(40_000)
	files := []string{c.Write("theirs.bin", data), c.Write("writable.bin", data)}
	shared := filepath.Join(c.Dir, "shared")
	must(t, os.Mkdir(shared, 0o777))
	must(t, os.Chmod(shared, 0o777))
	c.RAM = filepath.Join(shared, "ram")
	c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB")
	c.Warm()
	stop := holdJob(c)
	defer stop()
	for i, f := range files {
		cp := c.CopyOf(c.RAM, f)
		fi, err := os.Stat(cp)
		must(t, err)
		must(t, os.WriteFile(cp, bytes.Repeat([]byte("P"), len(data)), 0o644))
		must(t, os.Chtimes(cp, fi.ModTime(), fi.ModTime()))
		mode := "0644"
		if i == 0 {
			must(t, os.Chown(cp, attacker.uid, attacker.gid))
		} else {
			must(t, os.Chmod(cp, 0o666))
			mode = "0666"
		}
		owner := map[int]int{0: attacker.uid, 1: 0}[i]
		r := c.Run(time.Minute, "cat", f)
		if r.Err != nil || r.Stdout != string(data) {
			t.Errorf("cat %s: %v, %q..., want the original's bytes", f, r.Err, head(r.Stdout))
		}
		want := fmt.Sprintf("augur: tier %s: the copy of %s is owned by uid %d, mode %s, not by you (uid 0) alone: not served",
			c.RAM, f, owner, mode)
		if lines := augurLines(r.Stderr); len(lines) != 1 || lines[0] != want {
			t.Errorf("cat %s: augur said %q, want %q", f, lines, want)
		}
	}
	seg, err := shim.OpenSegment(shim.SegmentPath(c.job()))
	must(t, err)
	defer seg.Close()
	if n := seg.Stats().Untrusted; n != 2 {
		t.Errorf("augur stat counts %d copies refused, want 2", n)
	}
}

// TestShortCommandsLeaveLatestJobsOnly: every process started with the
// plain preload leads a job of its own, and each used to leave its 4 MiB
// segment and lock in /dev/shm (29 after a few dozen commands). After a
// hundred, only the latest jobs' state may be there.
func TestShortCommandsLeaveLatestJobsOnly(t *testing.T) {
	c := NewCase(t)
	f := c.Write("a.bin", randomBytes(1000))
	c.Set("AUGUR_JOB=") // each command names a job of its own
	mine := func() map[string]bool {
		dirs, _ := filepath.Glob(fmt.Sprintf("/dev/shm/augur.%d.*", os.Geteuid()))
		set := map[string]bool{}
		for _, d := range dirs {
			set[d] = true
		}
		return set
	}
	before := mine()
	for i := 0; i < 100; i++ {
		c.MustRun(time.Minute, "cat", f)
	}
	var left []string
	for d := range mine() {
		if !before[d] {
			left = append(left, d)
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	if len(left) > 5 { // the 4 latest ended jobs and the last command's own
		t.Errorf("%d jobs' state left in /dev/shm after 100 commands, want at most 5: %v", len(left), left)
	}
	out, err := c.Augur("clean", "--jobs")
	if err != nil {
		t.Fatalf("augur clean --jobs: %v\n%s", err, out)
	}
	for _, d := range left {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("augur clean --jobs left %s", d)
		}
	}
}

// TestAttackSwappedTier: the victim's tier sits in a directory everyone
// may write that is not sticky, so while the victim's job runs the
// attacker renames the tier away and puts one of its own in its place,
// with a copy of the file the job reads next. The job's next open must
// not be served that copy.
func TestAttackSwappedTier(t *testing.T) {
	w := newVictimWorld(t)
	shared := filepath.Join(w.Dir, "shared")
	must(t, os.Mkdir(shared, 0o777))
	must(t, os.Chmod(shared, 0o777))
	tier := filepath.Join(shared, "tier")
	w.Set("AUGUR_TIERS=" + tier + ":1GiB")
	if out, err := w.victimAugur("warm"); err != nil {
		t.Fatalf("augur warm: %v\n%s", err, out)
	}
	cp, err := tiering.CopyPath(tier, w.file)
	must(t, err)
	a := w.v.argv(true, Python, "-c", `import hashlib, sys
for line in sys.stdin:
    print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest(), flush=True)`, w.file)
	reader := exec.Command(a[0], a[1:]...)
	reader.Env = append(os.Environ(), w.Env...)
	reader.Env = append(reader.Env, "AUGUR_JOB=swap-"+randHex(4))
	var stderr bytes.Buffer
	reader.Stderr = &stderr
	in, err := reader.StdinPipe()
	must(t, err)
	outPipe, err := reader.StdoutPipe()
	must(t, err)
	must(t, reader.Start())
	t.Cleanup(func() { reader.Process.Kill() })
	out := bufio.NewReader(outPipe)
	read := func() string {
		t.Helper()
		in.Write([]byte("\n"))
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("reader: %v\n%s", err, stderr.String())
		}
		return strings.TrimSpace(line)
	}
	want := sha256Hex(w.data)
	obs := Observe(t, tier)
	if got := read(); got != want {
		t.Fatalf("first read: %s, want %s", got, want)
	}
	obs.Stop()
	if obs.Opens(cp) == 0 {
		t.Fatal("the first read was not served from the tier: the attack below would prove nothing")
	}
	w.attack(fmt.Sprintf("mv %q %q", tier, tier+".gone"))
	w.plant(cp)
	if got := read(); got != want {
		t.Errorf("after the swap: read %s, want the original's %s", got, want)
	}
	in.Close()
	if err := reader.Wait(); err != nil {
		t.Errorf("reader: %v", err)
	}
	msg := fmt.Sprintf("augur: tier %s: the copy of %s is owned by uid 65534, mode 0666, not by you (uid %d) alone: not served",
		tier, w.file, w.v.uid)
	if lines := augurLines(stderr.String()); len(lines) != 1 || lines[0] != msg {
		t.Errorf("augur said %q, want %q", lines, msg)
	}
}
