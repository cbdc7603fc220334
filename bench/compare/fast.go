package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
)

// Fast sources (issue 44): a dataset already as fast as a RAM tier (a
// page cache that holds it, a tmpfs) gains nothing from augur, which must
// then cost it nothing. Small files at the highest open rates, no compute:
// each policy's epochs beside plain reads of the same files, in rounds of
// the configurations in turn (medians), every sample checked.
type fastScenario struct {
	Name  string          `json:"name"`
	About string          `json:"about"`
	Gen   dlbench.GenSpec `json:"generate"`
	TmpFS bool            `json:"tmpfs"` // the dataset in /dev/shm, else on the local disk (page-cache hot)
	Ranks int             `json:"ranks"`
	Work  int             `json:"workers"`
}

var fastScenarios = []fastScenario{
	{Name: "F1", About: "20 classes x 1000 files of 4 KiB on the local disk, page-cache hot, 1 rank x 4 workers",
		Gen: dlbench.GenSpec{Layout: dlbench.LayoutImageFolder, Count: 20000, Size: 4096, Classes: 20, Seed: 1}, Ranks: 1, Work: 4},
	{Name: "F2", About: "the same files in a tmpfs, 2 ranks x 2 workers",
		Gen: dlbench.GenSpec{Layout: dlbench.LayoutImageFolder, Count: 20000, Size: 4096, Classes: 20, Seed: 1}, TmpFS: true, Ranks: 2, Work: 2},
}

// fastConfigs are plain reads and each policy; static reads copies augur
// warm made of every file.
var fastConfigs = []string{"plain", "static", "reactive", "clairvoyant"}

// fastResult is one fast-source scenario's rounds and medians.
type fastResult struct {
	fastScenario
	Dataset  string               `json:"dataset"`
	Workload dlbench.Workload     `json:"workload"`
	Rounds   [][]*run             `json:"rounds"`
	Medians  map[string][]float64 `json:"median_epoch_seconds"`
	Seconds  float64              `json:"seconds"`
}

// fastWanted is the fast-source scenarios only names (F: all).
func fastWanted(only string) []fastScenario {
	var out []fastScenario
	for _, s := range fastScenarios {
		if only == "" || strings.Contains(","+only+",", ","+s.Name+",") || strings.Contains(","+only+",", ",F,") {
			out = append(out, s)
		}
	}
	return out
}

func (e *env) runFast(s fastScenario, rounds int, policies map[string]string, prog *dlbench.ProgressLine) (*fastResult, error) {
	start := time.Now()
	fmt.Printf("\n== %s: %s\n", s.Name, s.About)
	base := filepath.Join(e.work, "F-disk")
	if s.TmpFS {
		base = filepath.Join("/dev/shm", fmt.Sprintf("augur-bench-fast-%d", os.Getpid()))
		defer os.RemoveAll(base)
	}
	ds, err := dlbench.Generate(filepath.Join(base, "data"), s.Gen)
	if err != nil {
		return nil, err
	}
	tier := filepath.Join("/dev/shm", fmt.Sprintf("augur-bench-fast-tier-%d", os.Getpid()))
	defer os.RemoveAll(tier)
	w := dlbench.DefaultWorkload()
	w.Ranks, w.Workers, w.Batch, w.Compute, w.Verify = s.Ranks, s.Work, 64, 0, true
	fr := &fastResult{fastScenario: s, Dataset: ds.Describe(), Workload: w, Medians: map[string][]float64{}}
	warmRead(ds.Root) // the page cache holds the dataset from the first round on
	for round := 0; round < rounds; round++ {
		var runs []*run
		for _, name := range fastConfigs {
			r, err := e.fastRun(s, ds, w, name, tier, round, policies, prog)
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
		}
		fr.Rounds = append(fr.Rounds, runs)
	}
	for k, name := range fastConfigs {
		for ep := 0; ep < w.Epochs; ep++ {
			var xs []float64
			for _, runs := range fr.Rounds {
				if r := runs[k].Result; r != nil && ep < len(r.Epochs) {
					xs = append(xs, r.Epochs[ep].Seconds)
				}
			}
			if len(xs) > 0 {
				fr.Medians[name] = append(fr.Medians[name], median(xs))
			}
		}
	}
	fr.Seconds = time.Since(start).Seconds()
	return fr, nil
}

// fastRun runs configuration name once: the tier emptied (and filled by
// augur warm for static) first.
func (e *env) fastRun(s fastScenario, ds *dlbench.Dataset, w dlbench.Workload, name, tier string, round int,
	policies map[string]string, prog *dlbench.ProgressLine) (*run, error) {
	r := &run{Config: name}
	x := dlbench.Exec{Reader: e.reader, Root: ds.Root}
	job := ""
	if name != "plain" {
		if policies[name] != "available" {
			r.Skipped = policies[name]
			return r, nil
		}
		if err := os.RemoveAll(tier); err != nil {
			return nil, err
		}
		job = fmt.Sprintf("bench-%d-%s-%s-%d", os.Getpid(), s.Name, name, round)
		defer removeJob(job)
		x.Preload = e.lib
		x.Env = policyEnv(ds.Root, tier+":1GiB", name, job, w)
		if name == "static" {
			cmd := exec.Command(e.augur, "warm", "--quiet")
			cmd.Env = append(os.Environ(), x.Env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				r.Error = fmt.Sprintf("augur warm: %v: %s", err, out)
				return r, nil
			}
		}
	}
	x.Progress = prog.Func(fmt.Sprintf("%s %s round %d", s.Name, name, round+1))
	res, err := dlbench.Run(e.ctx, name, ds, w, x)
	prog.Clear()
	r.Result = res
	if err == nil {
		err = readErrors(res)
	}
	if err == nil && job != "" {
		r.AugurStat, err = e.augurStat(job, 1)
	}
	if err != nil {
		r.Error = err.Error()
		fmt.Printf("  %-12s failed: %v\n", name, err)
		return r, nil
	}
	fmt.Printf("  %-12s epochs %s\n", name, epochList(r))
	return r, nil
}

// warmRead reads every file under root once, into the page cache.
func warmRead(root string) {
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if f, err := os.Open(p); err == nil {
				io.Copy(io.Discard, f)
				f.Close()
			}
		}
		return nil
	})
}

// printFast prints a fast-source scenario's medians and their ratios to
// plain reads'.
func printFast(out io.Writer, fr *fastResult) {
	fmt.Fprintf(out, "\n%s: %s — %s; 1 GiB RAM tier; %s; medians of %d round(s)\n",
		fr.Name, fr.About, fr.Dataset, fr.Workload.Describe(), len(fr.Rounds))
	fmt.Fprintln(out, "| config | epoch 1 | epoch 2 | epoch 3 | epoch 1 x plain | epochs 2+ x plain |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	plain := fr.Medians["plain"]
	for _, name := range fastConfigs {
		m := fr.Medians[name]
		if len(m) < 3 || len(plain) < 3 {
			fmt.Fprintf(out, "| %s | - | - | - | - | - |\n", name)
			continue
		}
		later := (m[1] + m[2]) / (plain[1] + plain[2])
		fmt.Fprintf(out, "| %s | %.3f | %.3f | %.3f | %.2f | %.2f |\n", name, m[0], m[1], m[2], m[0]/plain[0], later)
	}
	fmt.Fprintln(out, "targets (issue 44): epoch 1 at most 1.15x plain, epochs 2+ at most 1.10x")
}
