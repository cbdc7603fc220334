package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// torchRunTimeout bounds one DataLoader epoch. The epochs here take
// seconds; only a hang (a worker stuck in the Go runtime after fork, a
// deadlocked hook) gets near it.
const torchRunTimeout = 3 * time.Minute

// torchEpoch is what test/python/torch_loader.py printed.
type torchEpoch struct {
	Main    int               `json:"main"`
	PIDs    []int             `json:"pids"`    // processes that loaded samples
	Samples map[string]string `json:"samples"` // path → digest
}

func parseTorchEpoch(t *testing.T, r Result) torchEpoch {
	t.Helper()
	var e torchEpoch
	if err := json.Unmarshal([]byte(r.Stdout), &e); err != nil {
		t.Fatalf("torch_loader.py output: %v\nstdout:\n%s\nstderr:\n%s", err, r.Stdout, r.Stderr)
	}
	return e
}

// checkLoaders checks that the samples came from num_workers worker
// processes (or the main one), so the reads under test really happened
// where the configuration says.
func checkLoaders(t *testing.T, e torchEpoch, workers int) {
	t.Helper()
	if workers == 0 {
		if len(e.PIDs) != 1 || e.PIDs[0] != e.Main {
			t.Errorf("num_workers=0: samples loaded by %v, want only the main process %d", e.PIDs, e.Main)
		}
		return
	}
	// 24 samples in batches of 4 are dealt round-robin to the workers, so
	// each of them loads some.
	if len(e.PIDs) != workers {
		t.Errorf("num_workers=%d: samples loaded by %d processes %v", workers, len(e.PIDs), e.PIDs)
	}
	for _, p := range e.PIDs {
		if p == e.Main {
			t.Errorf("num_workers=%d: the main process %d loaded samples", workers, p)
		}
	}
}

// TestTorchImageFolder runs torchvision's ImageFolder through a DataLoader
// with 0, 2 and 4 workers under the fork, forkserver and spawn start
// methods, with every image warmed into RAM. For each run the kernel must
// have opened no original and every RAM copy (inotify), each sample's
// bytes must equal the original file's, and the run must finish (a hang
// is killed at torchRunTimeout and fails). A last run decodes the JPEGs
// with the default PIL loader and compares the tensors with a run without
// the shim.
func TestTorchImageFolder(t *testing.T) {
	needPython(t, "torch", "torchvision", "PIL")
	c := NewCase(t)
	root := filepath.Join(c.Dataset, "train")
	mustPlain(t, c.RunPlain(time.Minute, Python, pyScript("gen_media.py"), "classes", root, "3", "8"))
	files := datasetFiles(t, root)
	if len(files) != 24 {
		t.Fatalf("generated %d images, want 24", len(files))
	}
	want := map[string]string{}
	for _, f := range files {
		want[f] = fileSHA256(t, f)
	}
	script := pyScript("torch_loader.py")
	// Decoded without the shim, from the originals, before warming.
	pilWant := parseTorchEpoch(t, mustPlain(t, c.RunPlain(torchRunTimeout, Python, script, "pil", root, "0", "fork")))
	c.Warm()
	assertHaveRAMCopies(t, c, files)

	check := func(t *testing.T, workers int, e torchEpoch, want map[string]string) {
		t.Helper()
		if len(e.Samples) != len(files) {
			t.Errorf("got %d samples, want %d", len(e.Samples), len(files))
		}
		for _, f := range files {
			if got, ok := e.Samples[f]; !ok {
				t.Errorf("%s: never loaded", f)
			} else if got != want[f] {
				t.Errorf("%s: sample digest %s, want %s", f, got, want[f])
			}
		}
		checkLoaders(t, e, workers)
	}
	type config struct {
		workers int
		context string
	}
	configs := []config{{0, "fork"}}
	for _, w := range []int{2, 4} {
		for _, ctx := range []string{"fork", "forkserver", "spawn"} {
			configs = append(configs, config{w, ctx})
		}
	}
	for _, cf := range configs {
		name := fmt.Sprintf("raw/workers=%d", cf.workers)
		if cf.workers > 0 {
			name += "/" + cf.context
		}
		t.Run(name, func(t *testing.T) {
			obs := Observe(t, c.Dataset, c.RAM)
			r := runIn(t, c, torchRunTimeout, Python, script, "raw", root, fmt.Sprint(cf.workers), cf.context)
			obs.Stop()
			check(t, cf.workers, parseTorchEpoch(t, r), want)
			assertServedFromRAM(t, c, obs, files)
		})
	}
	t.Run("pil/workers=2/fork", func(t *testing.T) {
		obs := Observe(t, c.Dataset, c.RAM)
		r := runIn(t, c, torchRunTimeout, Python, script, "pil", root, "2", "fork")
		obs.Stop()
		check(t, 2, parseTorchEpoch(t, r), pilWant.Samples)
		assertServedFromRAM(t, c, obs, files)
	})
}
