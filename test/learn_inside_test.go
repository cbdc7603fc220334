package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// learnInside is the job that reads samples inside HDF5 files
// (test/python/learn_inside.py).
var learnInside = pyScript("learn_inside.py")

// TestClairvoyantLearnsSamplesInsideFiles runs a job that reads h5py
// datasets (a ConcatDataset of one per file) through a DataLoader's two
// workers in a DistributedSampler's order, told nothing but the seed, and
// requires augur stat to show each rank's sampler learned with the
// layout of its samples (a contiguous dataset: fixed records, beside
// another dataset of the file; a chunked one, a chunk per sample: records
// in runs between the chunk index's nodes), for a job that starts at
// epoch 0, one resumed at epoch 5, and one of two ranks; and every sample
// read to be the bytes written.
func TestClairvoyantLearnsSamplesInsideFiles(t *testing.T) {
	needPython(t, "h5py", "numpy", "torch")
	const files, per, seedValue = 2, 160, 42 // 10 MiB files: tiered in blocks
	for _, tc := range []struct {
		name, dataset string
		first, ranks  int
	}{
		{"contiguous", "contig", 0, 1},
		{"chunked", "chunked", 0, 1},
		{"resumed-at-5", "contig", 5, 1},
		{"two-ranks", "contig", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCase(t)
			c.Set("AUGUR_POLICY=clairvoyant")
			c.Set(fmt.Sprintf("AUGUR_SEED=%d", seedValue))
			c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB")
			c.Set("AUGUR=" + Augur)
			dir := filepath.Join(c.Dataset, "h5")
			must(t, os.MkdirAll(dir, 0o755))
			made := c.RunPlain(2*time.Minute, Python, learnInside, "make", dir, fmt.Sprint(files), fmt.Sprint(per))
			if made.Err != nil {
				t.Fatalf("make: %v\n%s", made.Err, made.Stderr)
			}
			want := sampleDigests(made.Stdout)
			var readers []string
			for r := 0; r < tc.ranks; r++ {
				readers = append(readers, fmt.Sprintf("RANK=%d WORLD_SIZE=%d %s %s read %s %s %d 2 %d &",
					r, tc.ranks, Python, learnInside, dir, tc.dataset, tc.first, seedValue))
			}
			stdout, stderr := c.AugurRun(statsAfter(c, []string{"sh", "-c", strings.Join(readers, " ") + " wait"})...)
			read := 0
			for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				f := strings.Fields(line)
				if len(f) != 4 || want[f[2]] != f[3] {
					t.Fatalf("read %q: want the sample's digest %s\nstderr:\n%s", line, want[f[2]], stderr)
				}
				read++
			}
			if read != 2*files*per {
				t.Errorf("%d samples read, want %d (2 epochs of %d)", read, 2*files*per, files*per)
			}
			st := statsOfRun(t, c)
			for r := 0; r < tc.ranks; r++ {
				ok := false
				for _, row := range st.Streams {
					if row.Samples != "" && row.Sampler != "" && row.Rank == r {
						t.Logf("rank %d: %+v", r, row)
						ok = row.Seed == seedValue && row.WorldSize == tc.ranks && row.Epoch >= tc.first &&
							strings.Contains(row.Samples, "records of 64.0 KiB") && strings.Contains(row.Samples, fmt.Sprintf("in %d files", files))
					}
				}
				if !ok {
					t.Errorf("rank %d's sampler of samples inside files not learned: seed %d, world size %d, epoch from %d, "+
						"records of 64 KiB in %d files wanted; streams %+v\nstderr:\n%s", r, seedValue, tc.ranks, tc.first, files, st.Streams, stderr)
				}
			}
		})
	}
}

// sampleDigests maps each key of make's output ("0 0 KEY SHA256") to its digest.
func sampleDigests(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 {
			m[f[2]] = f[3]
		}
	}
	return m
}
