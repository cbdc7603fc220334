package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
def rank(outdir, files):
    r = os.environ["LOCAL_RANK"]
    ctx = mp.get_context('fork')
    with ctx.Pool(2) as pool:
        lines = ["rank%s-worker %s" % (r, " ".join(out)) for out in pool.map(read, [files, files])]
    lines.append("rank%s-main %s" % (r, " ".join(read(files))))
    # A file per rank: the ranks' lines never meet in one pipe.
    with open(os.path.join(outdir, "rank%s.txt" % r), "w") as f:
        f.write("\n".join(lines) + "\n")
if os.environ.get("LOCAL_RANK") is None:
    procs = [subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, LOCAL_RANK=str(r))) for r in range(2)]
    codes = [p.wait() for p in procs]
    sys.exit(0 if all(c == 0 for c in codes) else 1)  # a rank killed by a signal is a failure too
rank(sys.argv[1], sys.argv[2:])
`
			prog := filepath.Join(c.Dir, "ranks.py")
			must(t, os.WriteFile(prog, []byte(script), 0o644))
			outdir := filepath.Join(c.Dir, "out")
			must(t, os.MkdirAll(outdir, 0o755))
			args := append([]string{prog, outdir}, files...)
			var out []byte
			var err error
			var errOut string
			if launch == "augur-run" {
				cmd := exec.Command(Augur, append([]string{"run", "--", Python}, args...)...)
				cmd.Env = append(os.Environ(), c.Env...)
				var eb strings.Builder
				cmd.Stderr = &eb
				out, err = cmd.Output()
				errOut = eb.String()
			} else {
				r := c.Run(3*time.Minute, Python, args...)
				out, err, errOut = []byte(r.Stdout), r.Err, r.Stderr
			}
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, out, errOut)
			}
			var lines []string
			for r := 0; r < 2; r++ {
				b, err := os.ReadFile(filepath.Join(outdir, fmt.Sprintf("rank%d.txt", r)))
				must(t, err)
				lines = append(lines, strings.Split(strings.TrimSpace(string(b)), "\n")...)
			}
			if len(lines) != 2*3 {
				t.Fatalf("%d lines of digests, want 6:\n%s", len(lines), out)
			}
			for _, line := range lines {
				for i, got := range strings.Fields(line)[1:] {
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
			if u := tierUsage(t, c.RAM); u.Bytes > ramCap || u.Bytes != ramBytes {
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
