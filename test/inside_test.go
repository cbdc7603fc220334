package test

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
)

// insideReaders is the script that reads samples inside large files as
// h5py, tarfile, numpy.fromfile and np.memmap do
// (test/python/inside_readers.py).
var insideReaders = pyScript("inside_readers.py")

const (
	insideEpochs  = 2
	insideH5N     = 96 // samples of 64 KiB per HDF5 dataset: a 12 MiB file
	insideRecords = 40 // records of insideRecSize: a 10 MiB file
	insideRecSize = 256 << 10
	insideHeader  = 2148 // before the first record: aligned to nothing
)

// insideClient is one real client's reads of samples inside files: the
// script's arguments (paths on the emulated PFS's mount) and the sample
// digests every epoch must show.
type insideClient struct {
	name string
	args []string
	want map[string]string
	// workers is the DataLoader workers that must have loaded samples
	// (h5py), 0 for a reader in one process.
	workers int
}

// Samples inside large files, read by real clients under augur run with
// each policy, on the emulated PFS without a client cache: h5py in the 2
// workers of a torch DataLoader, each opening the file itself and keeping
// it open to its exit (a contiguous and a chunked dataset of a 12 MiB
// file); Python's tarfile reading every member of four shards in stream
// mode; numpy.fromfile of each fixed record of a 10 MiB file after a
// 2148-byte header; np.memmap of the same records. Two epochs each, in
// shuffled orders: every sample of every epoch must be its bytes (the
// generator's digests, or Go's reading of the originals). The files are
// larger or smaller than wait_max (8 MiB); today each is tiered whole.
// augur stat must have seen each file opened; after augur warm, the
// static policy serves every open from a tier and the shared filesystem
// serves no byte.
func TestInsideFilesRealClients(t *testing.T) {
	needPython(t, "h5py", "numpy", "torch")
	c := NewCase(t)
	clients := insideDataset(t, c)
	var srv *pfsemu.Server
	srv = mountPFSWith(t, c, func(o *pfsemu.Options) {
		o.OpenLatency, o.ReadLatency, o.MetaLatency, o.Bandwidth = 0, 0, 0, 0
		o.DirectIO = true
	})
	c.Set("AUGUR_DATASET=" + filepath.Join(c.Dir, "pfs"))
	for _, policy := range []string{"static", "reactive", "clairvoyant"} {
		t.Run(policy, func(t *testing.T) {
			c.Set("AUGUR_POLICY=" + policy)
			for _, cl := range clients {
				t.Run(cl.name, func(t *testing.T) {
					// Each client starts cold, or warmed.
					freshTiers(t, c)
					if policy == "static" {
						c.Warm()
					}
					job := fmt.Sprintf("inside-%s-%s-%s", policy, cl.name, randHex(4))
					c.Set("AUGUR_JOB=" + job)
					defer removeJobState(job)
					before := srv.Stats()
					out, stderr := c.AugurRun(append([]string{"--", Python, insideReaders}, cl.args...)...)
					served := dlbench.SubStats(srv.Stats(), before)
					checkInsideEpochs(t, cl, out, stderr)
					st := jobStats(t, c, job)
					t.Logf("%s, %s: augur stat: %d opens, %d from a tier, %d copies, %d original bytes read; "+
						"the shared filesystem served %d opens, %d bytes", policy, cl.name, st.Opens, st.Opens-st.Misses,
						st.Copies, st.OriginalBytes, served.Opens, served.ReadBytes)
					if files := insideFiles(cl); st.Opens < uint64(files) {
						t.Errorf("augur stat shows %d opens of the dataset; the client opened %d files", st.Opens, files)
					}
					if policy == "static" && (st.Misses != 0 || served.ReadBytes != 0) {
						t.Errorf("static after augur warm: %d opens from the originals, %d bytes from the shared filesystem; want none",
							st.Misses, served.ReadBytes)
					}
					checkCopies(t, c)
				})
			}
		})
	}
}

// insideDataset makes the clients' files in c's dataset and returns the
// clients, with what their reads must give.
func insideDataset(t *testing.T, c *Case) []insideClient {
	t.Helper()
	mnt := filepath.Join(c.Dir, "pfs")
	epochs := fmt.Sprint(insideEpochs)
	h5 := filepath.Join(c.Dataset, "h5", "cosmo.h5")
	must(t, os.MkdirAll(filepath.Dir(h5), 0o755))
	made := mustPlain(t, c.RunPlain(time.Minute, Python, insideReaders, "h5-make", h5, fmt.Sprint(insideH5N)))
	h5want := map[string]map[string]string{"contig": {}, "chunked": {}}
	for _, l := range strings.Split(strings.TrimSpace(made.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("h5-make printed %q", l)
		}
		h5want[strings.Split(f[1], "/")[0]][f[1]] = f[2]
	}
	onMount := func(p string) string { return strings.Replace(p, c.Dataset, mnt, 1) }

	shards, err := dlbench.Generate(filepath.Join(c.Dataset, "shards"), dlbench.GenSpec{Layout: dlbench.LayoutTar,
		Count: 48, Size: 200 << 10, SizeStddev: 50 << 10, Files: 4, Seed: 3})
	must(t, err)
	tarArgs, tarWant := []string{"tar", epochs}, map[string]string{}
	for _, p := range uniquePaths(shards) {
		name := filepath.Join(shards.Root, p)
		tarArgs = append(tarArgs, onMount(name))
		for member, d := range tarMembers(t, name) {
			tarWant[p+"/"+member] = d
		}
	}

	rec, err := dlbench.Generate(filepath.Join(c.Dataset, "records"), dlbench.GenSpec{Layout: dlbench.LayoutRecords,
		Count: insideRecords, Size: insideRecSize, Files: 1, Header: insideHeader, Seed: 4})
	must(t, err)
	recFile := filepath.Join(rec.Root, rec.Samples[0].Path)
	orig, err := os.ReadFile(recFile)
	must(t, err)
	recWant := map[string]string{}
	for i := 0; i < insideRecords; i++ {
		off := insideHeader + i*insideRecSize
		recWant[fmt.Sprint(i)] = fmt.Sprintf("%x", sha256.Sum256(orig[off:off+insideRecSize]))
	}
	recArgs := func(how string) []string {
		return []string{how, onMount(recFile), fmt.Sprint(insideHeader), fmt.Sprint(insideRecSize), fmt.Sprint(insideRecords), epochs}
	}
	return []insideClient{
		{name: "h5py-contiguous", args: []string{"h5", onMount(h5), "contig", epochs}, want: h5want["contig"], workers: 2},
		{name: "h5py-chunked", args: []string{"h5", onMount(h5), "chunked", epochs}, want: h5want["chunked"], workers: 2},
		{name: "tarfile", args: tarArgs, want: tarWant},
		{name: "numpy-fromfile", args: recArgs("fromfile"), want: recWant},
		{name: "numpy-memmap", args: recArgs("memmap"), want: recWant},
	}
}

func uniquePaths(ds *dlbench.Dataset) []string {
	var out []string
	for _, s := range ds.Samples {
		if len(out) == 0 || out[len(out)-1] != s.Path {
			out = append(out, s.Path)
		}
	}
	return out
}

// tarMembers is the sha256 of every member of the tar file name, read by
// Go's archive/tar from the original.
func tarMembers(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(name)
	must(t, err)
	defer f.Close()
	out := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		hs := sha256.New()
		_, err = io.Copy(hs, tr)
		must(t, err)
		out[h.Name] = fmt.Sprintf("%x", hs.Sum(nil))
	}
}

// insideFiles is how many dataset files cl reads.
func insideFiles(cl insideClient) int {
	if cl.name == "tarfile" {
		return len(cl.args) - 2
	}
	return 1
}

// checkInsideEpochs checks that each epoch the client read every sample
// once, each with its bytes, and that the DataLoader's workers loaded
// them.
func checkInsideEpochs(t *testing.T, cl insideClient, out, stderr string) {
	t.Helper()
	got := make([]map[string]string, insideEpochs)
	for e := range got {
		got[e] = map[string]string{}
	}
	workers := map[int]int{} // epoch → processes that loaded its samples
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "workers" {
			var e, n int
			fmt.Sscan(f[1], &e)
			fmt.Sscan(f[2], &n)
			workers[e] = n
			continue
		}
		var e int
		if _, err := fmt.Sscan(f[0], &e); len(f) != 3 || err != nil || e < 0 || e >= insideEpochs {
			t.Fatalf("%s printed %q\nstderr:\n%s", cl.name, l, stderr)
		}
		if _, twice := got[e][f[1]]; twice {
			t.Errorf("%s: epoch %d read %s twice", cl.name, e, f[1])
		}
		got[e][f[1]] = f[2]
	}
	for e, m := range got {
		bad := 0
		for k, d := range cl.want {
			if m[k] != d {
				bad++
				if bad <= 3 {
					t.Errorf("%s: epoch %d: sample %s has digest %q, want %s", cl.name, e, k, m[k], d)
				}
			}
		}
		if bad > 0 || len(m) != len(cl.want) {
			t.Errorf("%s: epoch %d: %d samples read, %d wrong or missing, of %d", cl.name, e, len(m), bad, len(cl.want))
		}
	}
	for e := 0; cl.workers > 0 && e < insideEpochs; e++ {
		if workers[e] != cl.workers {
			t.Errorf("%s: epoch %d: %d DataLoader workers loaded samples, want %d", cl.name, e, workers[e], cl.workers)
		}
	}
}

// freshTiers gives c two empty tiers of its own, so that each policy
// starts cold.
func freshTiers(t *testing.T, c *Case) {
	t.Helper()
	ram, err := os.MkdirTemp("/dev/shm", "augur-test-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(ram) })
	c.RAM, c.Disk = ram, filepath.Join(t.TempDir(), "disk")
	c.Set("AUGUR_TIERS=" + c.RAM + ":1GiB," + c.Disk + ":1GiB")
}

// checkCopies checks that every copy the tiers hold of a dataset file is
// that file's bytes.
func checkCopies(t *testing.T, c *Case) {
	t.Helper()
	n := 0
	filepath.Walk(c.Dataset, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		for _, tier := range []string{c.RAM, c.Disk} {
			if _, err := os.Stat(c.CopyOf(tier, onPFS(c, p))); err == nil {
				sameFile(t, c.CopyOf(tier, onPFS(c, p)), p)
				n++
			}
		}
		return nil
	})
	t.Logf("%d copies in the tiers, each its file's bytes", n)
}
