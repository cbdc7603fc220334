package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/shim"
)

// trainPy is a training loop over an ImageFolder with a real DataLoader
// and DistributedSampler; it prints the sha256 of every sample it read.
const trainPy = `
import hashlib, os, sys, torch, torchvision
from torch.utils.data import DataLoader, DistributedSampler
root, seed, epochs, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
def load(p):
    with open(p, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()
ds = torchvision.datasets.ImageFolder(root, loader=load)
sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=seed, shuffle=True)
dl = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=workers,
                collate_fn=lambda b: [x[0] for x in b])
start = int(os.environ.get("START_EPOCH", "0"))
for e in range(start, start + epochs):
    sampler.set_epoch(e)
    for batch in dl:
        for d in batch:
            print(d)
`

// imageFolder makes classes of files with image names (their bytes need
// not decode: the loader hashes them) and returns the digests by path.
func imageFolder(t *testing.T, c *Case, classes, per int) map[string]string {
	want := map[string]string{}
	for k := 0; k < classes; k++ {
		files := c.RandomFiles(fmt.Sprintf("class%d", k), per, 4_000)
		for i, f := range files {
			p := filepath.Join(filepath.Dir(f), fmt.Sprintf("img%02d.jpg", i))
			must(t, os.Rename(f, p))
			want[p] = sha256Of(t, []string{p})[p]
		}
	}
	return want
}

// predicted runs augur plan --order for a rank and epoch.
func predicted(t *testing.T, c *Case, seed string, world, rank, epoch int) []string {
	t.Helper()
	out, err := c.Augur("plan", "--seed", seed, "--order", "--rank", fmt.Sprint(rank),
		"--epoch", fmt.Sprint(epoch))
	if err != nil {
		t.Fatalf("augur plan --order: %v\n%s", err, out)
	}
	return strings.Fields(out)
}

// The order in which a real DataLoader opens files, seen by inotify, is
// the order augur predicts from the seed: exactly with num_workers=0,
// batch by batch (4 files) with workers, for every rank and epoch.
func TestPredictedOrderMatchesDataLoader(t *testing.T) {
	c := NewCase(t)
	imageFolder(t, c, 3, 10)
	prog := filepath.Join(c.Dir, "train.py")
	must(t, os.WriteFile(prog, []byte(trainPy), 0o644))
	const world, epochs, seed = 2, 2, "1234"
	c.Set("AUGUR_WORLD_SIZE=" + fmt.Sprint(world))
	for _, workers := range []int{0, 2} {
		for rank := 0; rank < world; rank++ {
			t.Run(fmt.Sprintf("workers%d/rank%d", workers, rank), func(t *testing.T) {
				c.Set(fmt.Sprintf("RANK=%d", rank))
				c.Set(fmt.Sprintf("WORLD_SIZE=%d", world))
				// One epoch per run: fanotify merges a second open of a file
				// whose first is still queued.
				for e := 0; e < epochs; e++ {
					c.Set(fmt.Sprintf("START_EPOCH=%d", e))
					obs := ObservePids(t, c.Dataset)
					c.MustRun(3*time.Minute, Python, prog, c.Dataset, seed, "1", fmt.Sprint(workers))
					obs.Stop()
					want := predicted(t, c, seed, world, rank, e)
					if workers > 0 {
						checkBatches(t, obs.opens, want, 4)
						continue
					}
					if len(obs.opens) != 1 {
						t.Fatalf("opens by %d processes, want 1", len(obs.opens))
					}
					for _, got := range obs.opens {
						if strings.Join(got, "\n") != strings.Join(want, "\n") {
							t.Fatalf("epoch %d: observed order\n%v\npredicted\n%v", e, got, want)
						}
					}
				}
			})
		}
	}
}

// checkBatches checks opens made by DataLoader workers: each worker
// reads whole batches, in the predicted order within a batch, and every
// predicted batch is read exactly once.
func checkBatches(t *testing.T, opens map[int32][]string, want []string, batch int) {
	t.Helper()
	left := map[string]int{}
	for i := 0; i < len(want); i += batch {
		left[strings.Join(want[i:min(i+batch, len(want))], " ")]++
	}
	for pid, seq := range opens {
		for i := 0; i < len(seq); i += batch {
			b := strings.Join(seq[i:min(i+batch, len(seq))], " ")
			if left[b] == 0 {
				t.Fatalf("worker %d read %q, which is no predicted batch (or read it twice)", pid, b)
			}
			left[b]--
		}
	}
	for b, n := range left {
		if n > 0 {
			t.Fatalf("predicted batch %q never read", b)
		}
	}
}

// jobStats reads augur stat --json of a named job.
func jobStats(t *testing.T, c *Case, job string) shim.Stats {
	t.Helper()
	out, err := exec.Command(Augur, "stat", "--json", "--job", job).Output()
	if err != nil {
		t.Fatalf("augur stat: %v", err)
	}
	var st shim.Stats
	must(t, json.Unmarshal(out, &st))
	return st
}

// Under the clairvoyant policy with the job's seed, every access is
// predicted and the samples are right. With another seed nothing
// explains the opens (neither it nor DistributedSampler's default 0 at
// any epoch up to 999: the sampler draws from seed + epoch, so 999 would
// explain the script's 1234 at epoch 235): augur says so once, copies what is read as the reactive policy
// does, augur stat gives the reason, and the samples are still right.
func TestClairvoyantFollowsOrSaysWhyNot(t *testing.T) {
	for _, tc := range []struct {
		name, seed string
		explained  bool
	}{{"right-seed", "1234", true}, {"wrong-seed", "5000", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCase(t)
			// Enough files that a wrong order rarely lands near the cursor.
			want := imageFolder(t, c, 5, 200)
			prog := filepath.Join(c.Dir, "train.py")
			must(t, os.WriteFile(prog, []byte(trainPy), 0o644))
			job := "cv-" + randHex(4)
			c.Set("AUGUR_JOB=" + job)
			c.Set("AUGUR_POLICY=clairvoyant")
			out, stderr := c.AugurRun("--seed", tc.seed, "--", Python, prog, c.Dataset, "1234", "2", "2")
			digests := strings.Fields(out)
			if len(digests) != 2*len(want) {
				t.Fatalf("%d samples, want %d", len(digests), 2*len(want))
			}
			valid := map[string]bool{}
			for _, d := range want {
				valid[d] = true
			}
			for _, d := range digests {
				if !valid[d] {
					t.Fatalf("a sample's bytes match no file")
				}
			}
			st := jobStats(t, c, job)
			const reason = "no DistributedSampler with seed 5000 or 0"
			msgs := strings.Count(stderr, reason)
			if !tc.explained {
				if msgs != 1 || st.FellBack {
					t.Fatalf("%d messages (want 1), fell back %v (want false: planning worked): %s\n%+v", msgs, st.FellBack, stderr, st)
				}
				if st.Copies == 0 || st.Unpredicted == 0 {
					t.Errorf("%d copies, %d unpredicted opens: what is read unexplained must be copied", st.Copies, st.Unpredicted)
				}
				if len(st.Streams) != 1 || !strings.Contains(st.Streams[0].Why, reason) || st.Streams[0].Sampler != "" {
					t.Errorf("augur stat's streams %+v, want one saying %q", st.Streams, reason)
				}
				return
			}
			if st.FellBack || msgs != 0 || st.Accuracy < 0.99 || st.Unpredicted != 0 {
				t.Fatalf("prediction: %+v\n%s", st, stderr)
			}
			if st.PredHits+st.PredLate+st.PredMisses != uint64(len(digests)) {
				t.Errorf("%d predicted opens counted, %d samples read", st.PredHits+st.PredLate+st.PredMisses, len(digests))
			}
			// Opens that came while the plan was made are replayed into it at
			// once: the stream may lock after all of them.
			if len(st.Streams) != 1 || st.Streams[0].Sampler != "DistributedSampler" || st.Streams[0].Seed != 1234 ||
				st.Streams[0].WorldSize != 1 || st.Streams[0].Epoch != 1 || st.Streams[0].AfterLock != 0 ||
				st.Streams[0].Opens+st.Streams[0].BeforeLock != uint64(len(digests)) {
				t.Errorf("augur stat's streams %+v, want one following seed 1234, world size 1, at epoch 1", st.Streams)
			}
		})
	}
}

// A dataset the configured layout cannot list (flat files, no class
// folders, for an ImageFolder layout) cannot be predicted: the leader
// says so once, runs the reactive policy instead, and augur stat says
// which; the program reads the right bytes. The leader plans in the
// background, and a job that ends first never learns the plan failed:
// this one reads its files, then waits (at most a minute) until augur stat
// says the reactive policy runs, and the files it read before are copied.
func TestClairvoyantUnplannableRunsReactive(t *testing.T) {
	c := NewCase(t)
	files := c.RandomFiles("", 12, 8192)
	job := "cvu-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	c.Set("AUGUR_POLICY=clairvoyant")
	c.Set("AUGUR_BIN=" + Augur)
	const script = `sha256sum "$@" || exit 1
for i in $(seq 1200); do
    "$AUGUR_BIN" stat --job "$AUGUR_JOB" | grep -q "prediction: none" && exit 0
    sleep 0.05
done
echo "augur stat never said the prediction failed" >&2; exit 1`
	out, stderr := c.AugurRun(append([]string{"--", "sh", "-c", script, "sh"}, files...)...)
	want, err := exec.Command("sha256sum", files...).Output()
	must(t, err)
	if out != string(want) {
		t.Fatalf("sha256sum under augur:\n%s\nwithout:\n%s", out, want)
	}
	if n := strings.Count(stderr, "using the reactive policy"); n != 1 || !strings.Contains(stderr, "no class folder") {
		t.Fatalf("%d messages, want one naming the layout's problem:\n%s", n, stderr)
	}
	st := jobStats(t, c, job)
	if !st.FellBack || st.Predicted != 0 || st.Copies != uint64(len(files)) {
		t.Fatalf("fell back %v, %d predicted, %d copies (want true, 0, %d)", st.FellBack, st.Predicted, st.Copies, len(files))
	}
	text, err := exec.Command(Augur, "stat", "--job", job).Output()
	must(t, err)
	if !strings.Contains(string(text), "prediction: none") {
		t.Fatalf("augur stat does not say the prediction failed:\n%s", text)
	}
}

// A file no tier keeps is staged in the RAM tier just ahead of its read
// and dropped once read: after a one-epoch job the RAM tier holds exactly
// the files placement gave it, the staged ones were served from it, and
// every byte is right. The RAM tier holds 28 of the 60 files (the first
// 28 the job reads) plus a staging budget of 4.
func TestClairvoyantStagesAndDrops(t *testing.T) {
	c := NewCase(t)
	want := imageFolder(t, c, 2, 30)          // 60 files of 4000 bytes
	c.Set("AUGUR_TIERS=" + c.RAM + ":127KiB") // an eighth stages 4 files; 28 fit the rest
	c.Set("AUGUR_POLICY=clairvoyant")
	c.Set("AUGUR_EPOCHS=1")
	job := "cvs-" + randHex(4)
	c.Set("AUGUR_JOB=" + job)
	order := predicted(t, c, "7", 1, 0, 0)
	if len(order) != len(want) {
		t.Fatalf("predicted %d files, want %d", len(order), len(want))
	}
	// The reader starts once the plan is made and reads a file every
	// 20 ms, as a training step would: the staging keeps ahead of it.
	reader := `import hashlib, sys, time
time.sleep(1)
for p in sys.argv[1:]:
    print(p, hashlib.sha256(open(p, "rb").read()).hexdigest(), flush=True)
    time.sleep(0.02)
`
	out, stderr := c.AugurRun(append([]string{"--seed", "7", "--", Python, "-c", reader}, order...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(order) {
		t.Fatalf("%d lines from the reader, want %d\n%s", len(lines), len(order), stderr)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 || want[f[0]] != f[1] {
			t.Fatalf("wrong bytes: %q", l)
		}
	}
	for i, p := range order {
		_, err := os.Stat(c.CopyOf(c.RAM, p))
		switch placed := i < 28; {
		case placed && err != nil:
			t.Errorf("file %d of the order (placed) has no copy: %v", i, err)
		case !placed && err == nil:
			t.Errorf("file %d of the order (staged) was not dropped after its read", i)
		}
	}
	st := jobStats(t, c, job)
	if st.Events != uint64(2*len(order)) { // the clairvoyant policy reads closes too
		t.Errorf("%d events for %d opens and closes", st.Events, 2*len(order))
	}
	if st.StagedFiles != 0 || len(st.Tiers) != 1 || st.Tiers[0].Hits < 28+16 {
		t.Fatalf("staged %d files at the end, tier hits %v: want 0 staged and most of the 32 staged files served from the tier",
			st.StagedFiles, st.Tiers)
	}
}
