package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/augur-hpc/augur/sim"
)

// cmdSim is augur sim: the job's I/O time under each policy, simulated
// (package sim, docs/sim.md).
func cmdSim(args []string) int { return runSim(args, os.Stdout, os.Stderr) }

func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "TOML file of the job (defaults: NoPFS's Lassen parameters)")
	var nodes []int
	fs.Func("nodes", "nodes, or several counts (like 16,64,256,1024): each simulated, a panel each in --png", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("node count %q: want a positive number", f)
			}
			nodes = append(nodes, n)
		}
		return nil
	})
	ranks := fs.Int("ranks-per-node", 0, "ranks per node")
	epochs := fs.Int("epochs", 0, "epochs")
	count := fs.Int("dataset-count", 0, "files in the dataset")
	size := fs.String("dataset-size", "", "mean file size and standard deviation, like 0.1077MB,0.1MB")
	dir := fs.String("dataset-dir", "", "simulate the files of this directory (ImageFolder) instead")
	curve := fs.String("pfs-throughput", "", "the PFS's throughput by readers, like 1:330MB/s,8:2870MB/s")
	var policies []string
	fs.Func("policy", "a policy to simulate (repeat; default all: "+strings.Join(sim.Policies, ", ")+")", func(s string) error {
		policies = append(policies, strings.Split(s, ",")...)
		return nil
	})
	jsonOut := fs.String("json", "", "write the results as JSON to this file (- for stdout)")
	pngOut := fs.String("png", "", "write stacked bars of compute and stall per policy to this PNG")
	validate := fs.String("validate", "", "simulate make bench's scenarios and compare with this bench.json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "augur sim: unexpected arguments %q\n", fs.Args())
		return 2
	}
	// A number given overrides the configuration's, also a bad one (0
	// epochs is an error, not the default).
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["ranks-per-node"] {
		ranks = nil
	}
	if !given["epochs"] {
		epochs = nil
	}
	if !given["dataset-count"] {
		count = nil
	}
	for _, name := range []string{*jsonOut, *pngOut} {
		if err := writable(name); err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 1
		}
	}
	if *validate != "" {
		if err := sim.Validate(stdout, *validate, *pngOut); err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 1
		}
		return 0
	}
	if len(nodes) == 0 {
		nodes = []int{0} // the configuration's
	}
	var results []*sim.Result
	var panels []sim.Panel
	for _, n := range nodes {
		cfg := sim.Lassen()
		if *config != "" {
			if err := cfg.ReadFile(*config); err != nil {
				fmt.Fprintf(stderr, "augur sim: %v\n", err)
				return 1
			}
		}
		if err := applyFlags(cfg, n, ranks, epochs, count, *size, *dir, *curve, policies); err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 2
		}
		res, err := sim.Run(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 1
		}
		if *jsonOut != "-" {
			sim.WriteTable(stdout, res)
		}
		results = append(results, res)
		panels = append(panels, sim.Panel{Title: fmt.Sprintf("%d nodes", cfg.Nodes), Result: res})
	}
	if *jsonOut != "" {
		if err := writeSimJSON(*jsonOut, results, stdout); err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 1
		}
	}
	if *pngOut != "" {
		if err := sim.Plot(*pngOut, panels); err != nil {
			fmt.Fprintf(stderr, "augur sim: %v\n", err)
			return 1
		}
	}
	return 0
}

// writable says why the file name (none: "", or - for stdout) could not
// be written, before a simulation of minutes would find it out: it opens
// for writing, neither truncated nor, if it was not there, left behind.
func writable(name string) error {
	if name == "" || name == "-" {
		return nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		if f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			defer os.Remove(name)
		}
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// writeSimJSON writes the results to name (- for w): one result as an
// object, several (one per node count) as a list.
func writeSimJSON(name string, results []*sim.Result, w io.Writer) error {
	var v any = results
	if len(results) == 1 {
		v = results[0]
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	data = append(data, '\n')
	if name == "-" {
		_, err := w.Write(data)
		return err
	}
	return os.WriteFile(name, data, 0o644)
}

// applyFlags sets what the flags give over the configuration (nodes 0
// and a nil number: not given, the configuration's).
func applyFlags(cfg *sim.Config, nodes int, ranks, epochs, count *int, size, dir, curve string, policies []string) error {
	if nodes != 0 {
		cfg.Nodes = nodes
	}
	for _, f := range []struct {
		dst, v *int
	}{{&cfg.RanksPerNode, ranks}, {&cfg.Epochs, epochs}, {&cfg.Dataset.Count, count}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if size != "" {
		mean, sigma, _ := strings.Cut(size, ",")
		m, err := sim.ParseSize(mean)
		if err != nil {
			return err
		}
		cfg.Dataset.Mean, cfg.Dataset.Sigma = m, 0
		if sigma != "" {
			if cfg.Dataset.Sigma, err = sim.ParseSize(sigma); err != nil {
				return err
			}
		}
	}
	if dir != "" {
		cfg.Dataset.Dir = dir
	}
	if curve != "" {
		c, err := sim.ParseCurve(curve)
		if err != nil {
			return err
		}
		cfg.PFS.Curve = c
	}
	if policies != nil {
		cfg.Policies = policies
	}
	return nil
}
