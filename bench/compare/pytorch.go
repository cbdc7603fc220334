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
	ds, err := dlbench.Scan(data, dlbench.LayoutImageFolder, 0)
	if err != nil {
		return nil, err
	}
	local := filepath.Join(dir, "local")
	if err := copyTree(data, local); err != nil {
		return nil, err
	}
	mnt := filepath.Join(dir, "pfs")
	if err := mountPoint(mnt); err != nil {
		return nil, err
	}
	popts := pfsOptions(data, mnt)
	srv, err := pfsemu.Mount(popts)
	if err != nil {
		return nil, err
	}
	defer func() { srv.Unmount() }()
	s := scenario{Name: "pytorch"}
	ram, disk, tierSpec := e.tiers(s)
	defer os.RemoveAll(filepath.Dir(ram))
	defer os.RemoveAll(disk)
	w := workload()
	args := []string{script, "run", "--epochs", fmt.Sprint(w.Epochs), "--workers", "2", "--batch", fmt.Sprint(w.Batch),
		"--seed", fmt.Sprint(w.Seed), "--compute-ms", fmt.Sprint(w.Compute.Milliseconds()), "--barrier"}
	pr := &pytorchResult{Images: len(ds.Samples), Bytes: ds.Bytes, Dataset: ds.Describe(),
		Command: python + " " + torchScript + " " + strings.Join(args[1:], " ") + " ROOT"}
	fmt.Printf("\n== PyTorch: DataLoader(ImageFolder of %d JPEGs, %s, PIL decode, 2 workers, batch %d, DistributedSampler seed %d)\n",
		len(ds.Samples), fmtMiB(ds.Bytes), w.Batch, w.Seed)
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
		if srv, err = ensureMounted(srv, popts, r); err != nil {
			return nil, err
		}
		root := mnt
		if c.read == "local" {
			root = local
		}
		var env []string
		if c.policy != "" {
			os.RemoveAll(ram)
			os.RemoveAll(disk)
			job := fmt.Sprintf("bench-%d-pytorch-%s", os.Getpid(), c.name)
			defer removeJob(job)
			env = []string{"LD_PRELOAD=" + e.lib, "AUGUR_DATASET=" + mnt, "AUGUR_TIERS=" + tierSpec,
				"AUGUR_POLICY=" + c.policy, fmt.Sprintf("AUGUR_SEED=%d", w.Seed), "AUGUR_JOB=" + job, "AUGUR_CONFIG=",
				fmt.Sprintf("AUGUR_BATCH_SIZE=%d", w.Batch), fmt.Sprintf("AUGUR_EPOCHS=%d", w.Epochs)}
		}
		if err := dlbench.DropCaches(); err != nil {
			return nil, err
		}
		if c.warm {
			if ok, err := e.warm(r, env[1:], srv); err != nil { // env[0] is LD_PRELOAD
				return nil, err
			} else if !ok {
				continue
			}
		}
		res, err := e.runPython(c.name, append(append([]string(nil), args...), root), env, srv, ds)
		r.Result = res
		if err != nil {
			r.Error = err.Error()
			fmt.Printf("  %s: %v\n", c.name, err)
			continue
		}
		fmt.Printf("  %-18s epochs %s  total %.2fs\n", c.name, epochList(r), r.total())
	}
	return pr, nil
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

func createFile(name string) (*os.File, error) { return os.Create(name) }
