package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/shim"
	"golang.org/x/sys/unix"
)

// tiers returns the RAM and disk tiers of the runs named name and their
// AUGUR_TIERS value. It makes their parents: augur makes only a tier's
// own directory, and drops a tier whose parent is missing (with a
// message), which make bench once did unnoticed for a dozen runs.
func (e *env) tiers(name string) (ram, disk string, spec string, err error) {
	ram = filepath.Join("/dev/shm", fmt.Sprintf("augur-bench-%d", os.Getpid()), name)
	disk = filepath.Join(e.work, name, "tier-disk")
	spec = fmt.Sprintf("%s:%d,%s:%d", ram, e.sized(ramTier), disk, e.sized(diskTier))
	for _, d := range []string{ram, disk} {
		if err := os.MkdirAll(filepath.Dir(d), 0o700); err != nil {
			return "", "", "", err
		}
	}
	return ram, disk, spec, nil
}

// augurStat is augur stat of job, checked to use every one of the tiers
// it was given: a run that lost a tier measured another configuration.
func (e *env) augurStat(job string, tiers int) (json.RawMessage, error) {
	out, err := exec.Command(e.augur, "stat", "--json", "--job", job).Output()
	if err != nil {
		return nil, fmt.Errorf("augur stat --job %s: %v", job, err)
	}
	var st shim.Stats
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("augur stat --job %s: %v", job, err)
	}
	if len(st.Tiers) != tiers {
		return nil, fmt.Errorf("augur used %d of the run's %d tiers (see the readers' stderr)", len(st.Tiers), tiers)
	}
	return json.RawMessage(out), nil
}

func (e *env) runScenario(s scenario, policies map[string]string, prog *dlbench.ProgressLine) (*scenarioResult, error) {
	start := time.Now()
	dir := filepath.Join(e.work, s.Name)
	count := int(e.sized(s.Bytes) / meanSize)
	fmt.Printf("\n== %s: %s (%d samples, ~%s)\n", s.Name, s.About, count, fmtMiB(e.sized(s.Bytes)))
	ds, local, mnt, err := prepare(dir, dlbench.GenSpec{Layout: dlbench.LayoutImageFolder,
		Count: count, Size: meanSize, SizeStddev: meanSize / 4, Classes: 10, Seed: 1})
	if err != nil {
		return nil, err
	}
	popts := pfsOptions(ds.Root, mnt, s.DirectIO)
	srv, err := pfsemu.Mount(popts)
	if err != nil {
		return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
	}
	defer func() { srv.Unmount() }()
	ram, disk, tierSpec, err := e.tiers(s.Name)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(ram))
	defer os.RemoveAll(disk)
	sr := &scenarioResult{scenario: s, Samples: len(ds.Samples), Dataset: ds.Describe(),
		RAMTier: e.sized(ramTier), DiskTier: e.sized(diskTier)}
	for i := 0; i < 2; i++ { // the better of two: one can meet writeback of the local copy
		rate, err := deliverable(ds, mnt)
		if err != nil {
			return nil, err
		}
		sr.PFSRate = max(sr.PFSRate, rate)
	}
	fmt.Printf("  the emulated PFS delivers %.0f MB/s to %d parallel readers (%.2fs for the dataset)\n",
		sr.PFSRate/1e6, rateReaders, float64(ds.Bytes)/sr.PFSRate)
	counters := func() (pfsemu.Stats, error) { return srv.Stats(), nil }
	// one runs configuration c with workload w; label names the run.
	one := func(c config, w dlbench.Workload, label string) (*run, error) {
		r := &run{Config: label, About: c.about}
		if c.policy != "" && policies[c.policy] != "available" {
			r.Skipped = policies[c.policy]
			return r, nil
		}
		if srv, err = ensureMounted(srv, popts, r); err != nil {
			return nil, err
		}
		job := ""
		x := dlbench.Exec{Reader: e.reader, Counters: counters, Root: mnt, BetweenEpochs: dlbench.DropCaches}
		switch c.read {
		case "local":
			x.Root = local
		case "none":
			w.NoIO = true
		}
		if c.policy != "" {
			for _, d := range []string{ram, disk} {
				if err := os.RemoveAll(d); err != nil {
					return nil, err
				}
			}
			job = fmt.Sprintf("bench-%d-%s-%s", os.Getpid(), s.Name, label)
			x.Preload = e.lib
			x.Env = policyEnv(mnt, tierSpec, c.policy, job, w)
			defer removeJob(job)
		}
		if err := dlbench.DropCaches(); err != nil {
			return nil, err
		}
		if c.warm {
			if ok, err := e.warm(r, x.Env, srv); err != nil || !ok {
				return r, err
			}
		}
		x.Progress = prog.Func(s.Name + " " + label)
		res, err := dlbench.Run(e.ctx, label, ds, w, x)
		prog.Clear()
		r.Result = res
		if err == nil {
			err = readErrors(res)
		}
		if err != nil {
			r.Error = err.Error()
			fmt.Printf("  %-26s failed: %v\n", label, err)
			return r, nil
		}
		if job != "" {
			if r.AugurStat, err = e.augurStat(job, 2); err != nil {
				r.Error = err.Error()
				fmt.Printf("  %-26s failed: %v\n", label, err)
				return r, nil
			}
		}
		fmt.Printf("  %-26s epochs %s  total %.2fs\n", label, epochList(r), r.total())
		return r, nil
	}
	for _, c := range configs {
		r, err := one(c, workload(), c.name)
		if err != nil {
			return nil, err
		}
		sr.Runs = append(sr.Runs, r)
	}
	// The same job with a start-up before its first read, for the
	// configurations whose first epoch can use it.
	for _, c := range configs {
		if !c.startup {
			continue
		}
		w := workload()
		w.Startup = startup
		r, err := one(c, w, c.name)
		if err != nil {
			return nil, err
		}
		sr.WithStartup = append(sr.WithStartup, r)
	}
	if err := e.firstEpochPairs(sr, configs, workload(), one); err != nil {
		return nil, err
	}
	sr.Seconds = time.Since(start).Seconds()
	return sr, nil
}

// policyEnv is the environment of readers under augur's preload with
// policy, reading the dataset at mnt into the tiers of tierSpec
// (AUGUR_TIERS), in job, running w.
func policyEnv(mnt, tierSpec, policy, job string, w dlbench.Workload) []string {
	return []string{"AUGUR_DATASET=" + mnt, "AUGUR_TIERS=" + tierSpec, "AUGUR_POLICY=" + policy,
		fmt.Sprintf("AUGUR_SEED=%d", w.Seed), "AUGUR_JOB=" + job, "AUGUR_CONFIG=",
		// What the clairvoyant policy must know of the readers.
		fmt.Sprintf("AUGUR_WORLD_SIZE=%d", w.Ranks), fmt.Sprintf("AUGUR_RANKS_PER_NODE=%d", w.Ranks),
		fmt.Sprintf("AUGUR_BATCH_SIZE=%d", w.Batch), fmt.Sprintf("AUGUR_EPOCHS=%d", w.Epochs)}
}

// firstRounds is how many times epoch 1 of no augur and of the reactive
// policy run, interleaved: their difference is a few percent, and one run
// of each (the table's) is not enough to tell it.
const firstRounds = 5

// firstEpochPairs runs epoch 1 alone of pfs and augur-reactive, one after
// the other, firstRounds times, into sr.
func (e *env) firstEpochPairs(sr *scenarioResult, configs []config, w dlbench.Workload,
	one func(config, dlbench.Workload, string) (*run, error)) error {
	w.Epochs = 1
	sr.FirstEpochs, sr.FirstEpochsBytes = map[string][]float64{}, map[string][]int64{}
	for round := 0; round < firstRounds; round++ {
		for _, c := range configs {
			if c.name != "pfs" && c.name != "augur-reactive" {
				continue
			}
			r, err := one(c, w, c.name)
			if err != nil {
				return err
			}
			if r.Result == nil || len(r.Result.Epochs) == 0 || r.Result.Epochs[0].PFS == nil {
				return fmt.Errorf("%s epoch 1 alone: %s", c.name, r.Error)
			}
			ep := r.Result.Epochs[0]
			sr.FirstEpochs[c.name] = append(sr.FirstEpochs[c.name], ep.Seconds)
			sr.FirstEpochsBytes[c.name] = append(sr.FirstEpochsBytes[c.name], ep.PFS.ReadBytes)
		}
	}
	return nil
}

// prepare generates a scenario's dataset in dir/data (reused when there),
// copies it to dir/local once, and makes the emulated PFS's mount point
// dir/pfs.
func prepare(dir string, g dlbench.GenSpec) (ds *dlbench.Dataset, local, mnt string, err error) {
	if ds, err = dlbench.Generate(filepath.Join(dir, "data"), g); err != nil {
		return nil, "", "", err
	}
	local = filepath.Join(dir, "local")
	if err := copyTree(ds.Root, local); err != nil {
		return nil, "", "", fmt.Errorf("local copy: %w", err)
	}
	mnt = filepath.Join(dir, "pfs")
	return ds, local, mnt, mountPoint(mnt)
}

func epochList(r *run) string {
	var parts []string
	if r.Result != nil {
		for _, ep := range r.Result.Epochs {
			parts = append(parts, fmt.Sprintf("%.2fs", ep.Seconds))
		}
	}
	if r.WarmSecs > 0 {
		parts = append(parts, fmt.Sprintf("(warm %.2fs)", r.WarmSecs))
	}
	return strings.Join(parts, " ")
}

// copyTree makes dst a copy of src unless a complete copy is there (a
// stamp file beside dst records the source's size).
func copyTree(src, dst string) error {
	stamp := dst + ".copied"
	// The stamp names every file and its size, so a regenerated dataset
	// (other names, same bytes) is copied again.
	h := sha256.New()
	filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(src, p)
			fmt.Fprintf(h, "%s %d\n", rel, fi.Size())
		}
		return nil
	})
	want := fmt.Sprintf("%x", h.Sum(nil))
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		return nil
	}
	os.Remove(stamp)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// removeJob removes the shared-memory state of a job this program ran
// (and only those: other jobs' counters are not ours).
func removeJob(job string) { shim.RemoveJob(job) }

// ensureMounted returns srv, or a new mount of the same source when srv's
// mount has gone (something outside unmounted or aborted it); the run
// records that in its notes.
func ensureMounted(srv *pfsemu.Server, o pfsemu.Options, r *run) (*pfsemu.Server, error) {
	select {
	case <-srv.Done():
	default:
		if _, err := os.Stat(o.Mount); err == nil {
			return srv, nil
		}
	}
	srv.Unmount()
	n, err := pfsemu.Mount(o)
	if err != nil {
		return srv, fmt.Errorf("remounting the emulated PFS (it was unmounted from outside): %w", err)
	}
	r.Notes = append(r.Notes, "the emulated PFS mount had been lost (unmounted or aborted from outside) and was remounted before this run")
	fmt.Printf("  (the emulated PFS at %s was lost; remounted)\n", o.Mount)
	return n, nil
}

// readErrors turns failed sample reads, and samples read with wrong
// bytes, into an error: a run that did not read its data measured
// nothing.
func readErrors(res *dlbench.Result) error {
	var n, wrong int64
	for _, e := range res.Epochs {
		n += e.Errors
		wrong += e.Corrupt
	}
	if n > 0 {
		return fmt.Errorf("%d sample reads failed%s", n, firstLineOf(res.Stderr))
	}
	if wrong > 0 {
		return fmt.Errorf("%d samples read wrong bytes%s", wrong, firstLineOf(res.Stderr))
	}
	return nil
}

func firstLineOf(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return " (" + firstLine(s) + ")"
}

// mountPoint makes dir, detaching first a dead mount an earlier run left
// there ("transport endpoint is not connected"). dir is in our work
// directory: no one else's mount.
func mountPoint(dir string) error {
	// A mount left by a bench that was killed: its daemon gone
	// (ENOTCONN) or its connection aborted (ECONNABORTED).
	if _, err := os.Stat(dir); errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	return os.MkdirAll(dir, 0o755)
}

// rateReaders is how many readers measure the PFS's practical bandwidth.
const rateReaders = 32

// deliverable reads the whole dataset once through the mount with
// rateReaders parallel cat processes, page cache cold, and returns the
// bytes per second: what the emulator really serves on this machine,
// which its configured bandwidth is an upper bound of.
func deliverable(ds *dlbench.Dataset, mnt string) (float64, error) {
	var list strings.Builder
	seen := map[string]bool{}
	for _, smp := range ds.Samples {
		if !seen[smp.Path] {
			seen[smp.Path] = true
			fmt.Fprintln(&list, filepath.Join(mnt, filepath.FromSlash(smp.Path)))
		}
	}
	if err := dlbench.DropCaches(); err != nil {
		return 0, err
	}
	cmd := exec.Command("xargs", fmt.Sprintf("-P%d", rateReaders), "-n4", "cat")
	cmd.Stdin = strings.NewReader(list.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr // stdout: /dev/null
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("reading the dataset through the PFS: %v: %s", err, stderr.String())
	}
	return float64(ds.Bytes) / time.Since(t0).Seconds(), nil
}

// warm runs `augur warm` with env before a configuration, records its
// time, output and PFS traffic in r, and drops the page cache after it.
// ok is false when warm failed (r.Error says why); err is for a failure
// of the benchmark itself.
func (e *env) warm(r *run, env []string, srv *pfsemu.Server) (ok bool, err error) {
	before := srv.Stats()
	t0 := time.Now()
	cmd := exec.Command(e.augur, "warm", "--quiet") // its output is recorded
	cmd.Env = append(os.Environ(), env...)
	msg, werr := cmd.CombinedOutput()
	r.WarmSecs = time.Since(t0).Seconds()
	r.WarmOut = strings.TrimSpace(string(msg))
	d := dlbench.SubStats(srv.Stats(), before)
	r.WarmPFS = &d
	if werr != nil {
		r.Error = fmt.Sprintf("augur warm: %v: %s", werr, r.WarmOut)
		return false, nil
	}
	return true, dlbench.DropCaches()
}
