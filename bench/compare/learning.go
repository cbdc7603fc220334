package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/augur-hpc/augur/shim"
)

// The clairvoyant policy told nothing but the dataset, the tiers, the
// policy and the seed learns what the job reads from its opens (issue
// 11). These rows measure what learning costs where the configuration
// could not have told it: a job resumed from a checkpoint (its epochs
// are set_epoch(5..7)), and the ImageNet layout (ROOT/train shuffled,
// ROOT/val in order after every epoch, both under one dataset root).

// learnSetup is one such job, run without augur and under it.
type learnSetup struct {
	Name    string `json:"name"`
	About   string `json:"about"`
	Dataset string `json:"dataset"`
	Command string `json:"command"`
	Runs    []*run `json:"runs"`
}

const (
	learnTrain = 600 // JPEGs of the train+val set-up's train/; val/ has a third
	resumeAt   = 5
)

// runLearning runs the two set-ups: pfs (no shim), local, and augur's
// clairvoyant policy told only AUGUR_DATASET, AUGUR_TIERS, AUGUR_POLICY
// and AUGUR_SEED.
func (e *env) runLearning(policies map[string]string) ([]*learnSetup, error) {
	if policies["clairvoyant"] != "available" {
		return nil, nil
	}
	script, err := filepath.Abs(torchScript)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.work, "learn")
	resumed := filepath.Join(e.work, "pytorch", "data")
	if err := makeJPEGs(script, resumed, int(float64(torchImages)*e.scale)); err != nil {
		return nil, err
	}
	imagenet := filepath.Join(dir, "imagenet")
	train := int(float64(learnTrain) * e.scale)
	if err := makeJPEGs(script, filepath.Join(imagenet, "train"), train); err != nil {
		return nil, err
	}
	if err := makeJPEGs(script, filepath.Join(imagenet, "val"), train/3); err != nil {
		return nil, err
	}
	w := workload()
	args := []string{script, "run", "--epochs", fmt.Sprint(w.Epochs), "--workers", "2", "--batch", fmt.Sprint(w.Batch),
		"--seed", fmt.Sprint(w.Seed), "--compute-ms", fmt.Sprint(w.Compute.Milliseconds()), "--barrier"}
	setups := []struct {
		name, about, data string
		opts              []string
	}{
		{"resumed", fmt.Sprintf("resumed from a checkpoint: set_epoch(%d..%d)", resumeAt, resumeAt+w.Epochs-1),
			resumed, []string{"--start-epoch", fmt.Sprint(resumeAt)}},
		{"train+val", "ROOT/train shuffled, then ROOT/val in order, every epoch", imagenet, []string{"--val"}},
	}
	var out []*learnSetup
	for _, s := range setups {
		ls, err := e.learnOne(s.name, s.about, s.data, append(append([]string(nil), args...), s.opts...))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, ls)
	}
	return out, nil
}

// learnOne runs one set-up over its dataset data: without augur through
// the emulated PFS, from a local copy, and under augur told nothing of
// the job.
func (e *env) learnOne(name, about, data string, args []string) (*learnSetup, error) {
	slug := strings.ReplaceAll(name, "+", "-")
	dir := filepath.Join(e.work, "learn", slug)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	g, err := e.newPyRig(data, dir, "learn-"+slug)
	if err != nil {
		return nil, err
	}
	defer g.close()
	ls := &learnSetup{Name: name, About: about, Dataset: g.ds.Describe(),
		Command: python + " " + torchScript + " " + strings.Join(args[1:], " ") + " ROOT"}
	fmt.Printf("\n== Learning the job: %s (%s)\n", name, about)
	job := fmt.Sprintf("bench-%d-learn-%s", os.Getpid(), slug)
	defer removeJob(job)
	for _, c := range []config{configs[0], configs[1],
		{name: "augur-learned", read: "pfs", policy: "clairvoyant", about: "clairvoyant, told only dataset, tiers, policy, seed"}} {
		r := &run{Config: c.name, About: c.about}
		ls.Runs = append(ls.Runs, r)
		ran, err := e.pyRun(g, c, r, args, job)
		if err != nil {
			return nil, err
		}
		if !ran {
			continue
		}
		if c.policy != "" {
			if r.AugurStat, err = e.augurStat(job, 2); err != nil {
				r.Error = err.Error()
				fmt.Printf("  %-18s failed: %v\n", c.name, err)
				continue
			}
		}
		fmt.Printf("  %-18s epochs %s  total %.2fs  %s\n", c.name, epochList(r), r.total(), lockSummary(r))
	}
	return ls, nil
}

// lockSummary says, per stream and dataset augur stat shows, the opens
// before its lock, the seconds to it and the share of the opens after it
// that were expected.
func lockSummary(r *run) string {
	if len(r.AugurStat) == 0 {
		return "-"
	}
	var st shim.Stats
	if json.Unmarshal(r.AugurStat, &st) != nil {
		return "-"
	}
	var parts []string
	for _, s := range st.Streams {
		what := s.Dataset
		if what == "" {
			what = "root"
		}
		if s.Sampler == "" {
			parts = append(parts, fmt.Sprintf("%s: not learned (%s)", what, s.Why))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d opens, %.2f s before the lock (at epoch %d at the end), %.1f%% expected after",
			what, s.BeforeLock, s.LockSeconds, s.Epoch, 100*float64(s.Opens)/float64(max(s.Opens+s.AfterLock, 1))))
	}
	return strings.Join(parts, "; ")
}

// printLearning prints each set-up's table: epoch times, totals, ratios
// against local and pfs, PFS traffic, tier hits, and what learning took.
func printLearning(w io.Writer, setups []*learnSetup) {
	for _, ls := range setups {
		sr := &scenarioResult{scenario: scenario{Name: "Learning: " + ls.Name, About: ls.About},
			Dataset: ls.Dataset, Runs: ls.Runs, RAMTier: ramTier, DiskTier: diskTier}
		printScenario(w, sr)
		for _, r := range ls.Runs {
			if len(r.AugurStat) > 0 {
				fmt.Fprintf(w, "%s: %s\n", r.Config, lockSummary(r))
			}
		}
	}
}
