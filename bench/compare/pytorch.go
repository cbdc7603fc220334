package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
)

// python is Debian's interpreter, which has python3-torch,
// python3-torchvision and python3-pil (not a pyenv python3 on the PATH).
const python = "/usr/bin/python3"

const (
	torchImages = 1000
	torchScript = "bench/pytorch/loader.py"
)

type pytorchResult struct {
	Images  int    `json:"images"`
	Bytes   int64  `json:"bytes"`
	Dataset string `json:"dataset"`
	Command string `json:"command"`
	Runs    []*run `json:"runs"`
}

// runPyTorch runs bench/pytorch/loader.py (DataLoader over an ImageFolder
// of JPEGs, PIL decoding, 2 workers, DistributedSampler) in every
// configuration that reads: pfs, local, and augur with each available
// policy.
func (e *env) runPyTorch(policies map[string]string) (*pytorchResult, error) {
	script, err := filepath.Abs(torchScript)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.work, "pytorch")
	data := filepath.Join(dir, "data")
	if err := makeJPEGs(script, data, int(float64(torchImages)*e.scale)); err != nil {
		return nil, err
	}
	g, err := e.newPyRig(data, dir, "pytorch")
	if err != nil {
		return nil, err
	}
	defer g.close()
	w := workload()
	args := []string{script, "run", "--epochs", fmt.Sprint(w.Epochs), "--workers", "2", "--batch", fmt.Sprint(w.Batch),
		"--seed", fmt.Sprint(w.Seed), "--compute-ms", fmt.Sprint(w.Compute.Milliseconds()), "--barrier"}
	pr := &pytorchResult{Images: len(g.ds.Samples), Bytes: g.ds.Bytes, Dataset: g.ds.Describe(),
		Command: python + " " + torchScript + " " + strings.Join(args[1:], " ") + " ROOT"}
	fmt.Printf("\n== PyTorch: DataLoader(ImageFolder of %d JPEGs, %s, PIL decode, 2 workers, batch %d, DistributedSampler seed %d)\n",
		len(g.ds.Samples), fmtMiB(g.ds.Bytes), w.Batch, w.Seed)
	for _, c := range configs {
		if c.read == "none" {
			continue
		}
		r := &run{Config: c.name, About: c.about}
		pr.Runs = append(pr.Runs, r)
		if c.policy != "" && policies[c.policy] != "available" {
			r.Skipped = policies[c.policy]
			continue
		}
		job := fmt.Sprintf("bench-%d-pytorch-%s", os.Getpid(), c.name)
		if c.policy != "" {
			defer removeJob(job)
		}
		ran, err := e.pyRun(g, c, r, args, job, fmt.Sprintf("AUGUR_BATCH_SIZE=%d", w.Batch), fmt.Sprintf("AUGUR_EPOCHS=%d", w.Epochs))
		if err != nil {
			return nil, err
		}
		if ran {
			fmt.Printf("  %-18s epochs %s  total %.2fs\n", c.name, epochList(r), r.total())
		}
	}
	return pr, nil
}

// pyRig is what the PyTorch loader's runs over one dataset share: the
// dataset, its local copy, the emulated PFS serving it, and the tiers.
type pyRig struct {
	ds                  *dlbench.Dataset
	local, mnt          string
	popts               pfsemu.Options
	srv                 *pfsemu.Server
	ram, disk, tierSpec string
}

// newPyRig scans data, copies it under dir/local, mounts the emulated
// PFS over it at dir/pfs, and names the tiers of scenario name.
func (e *env) newPyRig(data, dir, name string) (*pyRig, error) {
	g := &pyRig{local: filepath.Join(dir, "local"), mnt: filepath.Join(dir, "pfs")}
	var err error
	if g.ds, err = dlbench.Scan(data, dlbench.GenSpec{Layout: dlbench.LayoutImageFolder}); err != nil {
		return nil, err
	}
	if err := copyTree(data, g.local); err != nil {
		return nil, err
	}
	if err := mountPoint(g.mnt); err != nil {
		return nil, err
	}
	if g.ram, g.disk, g.tierSpec, err = e.tiers(name); err != nil {
		return nil, err
	}
	g.popts = pfsOptions(data, g.mnt, false)
	if g.srv, err = pfsemu.Mount(g.popts); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *pyRig) close() {
	g.srv.Unmount()
	os.RemoveAll(filepath.Dir(g.ram))
	os.RemoveAll(g.disk)
}

// pyRun runs the loader (args, then the root) in configuration c, under
// augur as job (its variables, then extra) when c has a policy, from empty
// tiers and a cold page cache. ran is false when the run failed (r says
// why) or augur warm declined; err only when the bench cannot go on.
func (e *env) pyRun(g *pyRig, c config, r *run, args []string, job string, extra ...string) (ran bool, err error) {
	if g.srv, err = ensureMounted(g.srv, g.popts, r); err != nil {
		return false, err
	}
	root := g.mnt
	if c.read == "local" {
		root = g.local
	}
	var env []string
	if c.policy != "" {
		os.RemoveAll(g.ram)
		os.RemoveAll(g.disk)
		env = append([]string{"LD_PRELOAD=" + e.lib, "AUGUR_DATASET=" + g.mnt, "AUGUR_TIERS=" + g.tierSpec,
			"AUGUR_POLICY=" + c.policy, fmt.Sprintf("AUGUR_SEED=%d", workload().Seed), "AUGUR_JOB=" + job, "AUGUR_CONFIG="}, extra...)
	}
	if err := dlbench.DropCaches(); err != nil {
		return false, err
	}
	if c.warm {
		if ok, err := e.warm(r, env[1:], g.srv); err != nil || !ok { // env[0] is LD_PRELOAD
			return false, err
		}
	}
	res, err := e.runPython(c.name, append(append([]string(nil), args...), root), env, g.srv, g.ds)
	r.Result = res
	if err != nil {
		r.Error = err.Error()
		fmt.Printf("  %s: %v\n", c.name, err)
		return false, nil
	}
	return true, nil
}

// makeJPEGs writes count JPEGs under dir (loader.py make) unless the
// last run left them there.
func makeJPEGs(script, dir string, count int) error {
	stamp := dir + ".made"
	if b, err := os.ReadFile(stamp); err == nil && string(b) == fmt.Sprint(count) {
		return nil
	}
	os.Remove(stamp)
	os.RemoveAll(dir)
	if out, err := exec.Command(python, script, "make", dir, fmt.Sprint(count)).CombinedOutput(); err != nil {
		return fmt.Errorf("making JPEGs: %v: %s", err, out)
	}
	return os.WriteFile(stamp, []byte(fmt.Sprint(count)), 0o644)
}

// runPython runs the loader, reading the PFS counters between epochs.
func (e *env) runPython(name string, args, env []string, srv *pfsemu.Server, ds *dlbench.Dataset) (*dlbench.Result, error) {
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	res := &dlbench.Result{Name: name, Dataset: ds.Describe(), Root: args[len(args)-1]}
	prev := srv.Stats()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ep struct {
			Epoch   int     `json:"epoch"`
			Seconds float64 `json:"seconds"`
			Samples int64   `json:"samples"`
			Stall   float64 `json:"stall_seconds"`
		}
		if json.Unmarshal(sc.Bytes(), &ep) != nil {
			continue
		}
		now := srv.Stats()
		d := dlbench.SubStats(now, prev)
		prev = now
		res.Epochs = append(res.Epochs, dlbench.Epoch{Epoch: ep.Epoch, Samples: ep.Samples, Bytes: ds.Bytes,
			Seconds: ep.Seconds, SamplesPerSec: float64(ep.Samples) / ep.Seconds,
			MBPerSec: float64(ds.Bytes) / ep.Seconds / 1e6, Stall: ep.Stall, PFS: &d})
		if err := dlbench.DropCaches(); err != nil { // as for the C readers: see pfsOptions
			return res, err
		}
		io.WriteString(stdin, "next\n")
	}
	stdin.Close()
	err := cmd.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Overhead = res.Seconds - res.TotalSeconds()
	res.Stderr = lastLines(stderr.String(), 20)
	if err != nil {
		return res, fmt.Errorf("%v: %s", err, res.Stderr)
	}
	return res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func printPyTorch(w io.Writer, pr *pytorchResult) {
	sr := &scenarioResult{scenario: scenario{Name: "PyTorch", About: "DataLoader over JPEGs, PIL decode"},
		Dataset: pr.Dataset, Runs: pr.Runs, RAMTier: int64(float64(ramTier)), DiskTier: int64(float64(diskTier))}
	printScenario(w, sr)
}
