package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

// Several ranks of one job on a node (torchrun-style LOCAL_RANK
// processes, each with forked workers) share the node's tiers under one
// quota: every byte right, no file copied twice, no tier over capacity.
func TestRanksShareOneQuota(t *testing.T) {
	for _, launch := range []string{"augur-run", "preload"} {
		t.Run(launch, func(t *testing.T) {
			c := NewCase(t)
			c.Set("AUGUR_POLICY=reactive")
			const ramCap = 500_000
			c.Set("AUGUR_TIERS=" + c.RAM + ":" + strconv.Itoa(ramCap) + "," + c.Disk + ":1GiB")
			files := c.RandomFiles("cls", 12, 100_000)
			want := sha256Of(t, files)
			// A launcher starts 2 ranks; each forks 2 workers; every
			// process reads every file twice and prints the digests.
			script := `
import hashlib, multiprocessing as mp, os, subprocess, sys
def read(files):
    return [hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in files]
def rank(files):
    ctx = mp.get_context('fork')
    with ctx.Pool(2) as pool:
        for out in pool.map(read, [files, files]):
            print(" ".join(out), flush=True)
    print(" ".join(read(files)), flush=True)
if os.environ.get("LOCAL_RANK") is None:
    procs = [subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, LOCAL_RANK=str(r))) for r in range(2)]
    sys.exit(max(p.wait() for p in procs))
rank(sys.argv[1:])
`
			prog := filepath.Join(c.Dir, "ranks.py")
			must(t, os.WriteFile(prog, []byte(script), 0o644))
			args := append([]string{prog}, files...)
			var out []byte
			var err error
			if launch == "augur-run" {
				cmd := exec.Command(Augur, append([]string{"run", "--", Python}, args...)...)
				cmd.Env = append(os.Environ(), c.Env...)
				out, err = cmd.Output()
			} else {
				r := c.Run(3*time.Minute, Python, args...)
				out, err = []byte(r.Stdout), r.Err
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 2*3 {
				t.Fatalf("%d lines of digests, want 6:\n%s", len(lines), out)
			}
			for _, line := range lines {
				for i, got := range strings.Fields(line) {
					if got != want[files[i]] {
						t.Fatalf("%s: wrong bytes", files[i])
					}
				}
			}
			// augur run drains the copies before it exits; a preloaded
			// leader may be cut short, which may leave files uncopied but
			// never over quota or copied twice.
			var ramBytes int64
			copied := 0
			for _, f := range files {
				inRAM := exists(c.CopyOf(c.RAM, f))
				inDisk := exists(c.CopyOf(c.Disk, f))
				if inRAM && inDisk {
					t.Errorf("%s copied twice", f)
				}
				if inRAM {
					ramBytes += 100_000
				}
				if inRAM || inDisk {
					copied++
				}
			}
			if u := tiering.UsageOf(tiering.Tier{Path: c.RAM}); u.Bytes > ramCap || u.Bytes != ramBytes {
				t.Errorf("RAM tier holds %d bytes (capacity %d)", u.Bytes, ramCap)
			}
			if launch == "augur-run" && copied != len(files) {
				t.Errorf("%d of %d files copied", copied, len(files))
			}
		})
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
