package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/pfsemu"
)

// The reactive policy's first epoch against no augur (R1): MONARCH's
// best case, one process reading 320 files of 128 KiB in the same order
// for 3 epochs, with compute of zero, through `augur pfsemu`'s default
// PFS with and without a client page cache, for each way of reading a
// file. The two configurations run interleaved, round after round, and
// the medians are compared: what is measured is a few percent.
const (
	r1Files  = 320
	r1Size   = 128 << 10
	r1Rounds = 5
)

// r1Modes are the PFS client's modes: page cache (dropped between
// epochs, as a dataset larger than the client's memory would be) and
// direct I/O (none at all).
var r1Modes = []bool{false, true}

// firstEpochResult is R1 for one PFS mode and read mode.
type firstEpochResult struct {
	DirectIO bool   `json:"direct_io"`
	ReadMode string `json:"read_mode"`
	// Seconds[config][round][epoch] and PFSBytes[config][round][epoch].
	Seconds  map[string][][]float64 `json:"seconds"`
	PFSBytes map[string][][]int64   `json:"pfs_bytes"`
	Dataset  int64                  `json:"dataset_bytes"`
	Files    int                    `json:"files"`
	FileSize int64                  `json:"file_size"`
}

// r1Configs are R1's configurations: no augur, and augur's reactive
// policy under `augur run` (the reader is then plain C, its leader the
// augur command).
var r1Configs = []string{"pfs", "reactive"}

func (e *env) runFirstEpoch(prog *dlbench.ProgressLine) ([]*firstEpochResult, error) {
	fmt.Printf("\n== R1: the reactive policy's first epoch (%d files of %d KiB, 1 reader, %d interleaved rounds)\n", r1Files, r1Size>>10, r1Rounds)
	ds, mnt, ram, err := e.r1Dataset("R1", r1Files, r1Size)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(ram))
	var out []*firstEpochResult
	for _, direct := range r1Modes {
		opts := pfsemu.DefaultOptions(ds.Root, mnt)
		opts.DirectIO = direct
		srv, err := pfsemu.Mount(opts)
		if err != nil {
			return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
		}
		for _, mode := range []string{dlbench.ReadWhole, dlbench.ReadPread, dlbench.ReadMmap} {
			res := newFirstEpochResult(ds, r1Size, direct, mode)
			if err := e.firstEpochRounds(srv, ds, mnt, ram, res, prog); err != nil {
				srv.Unmount()
				return nil, err
			}
			printFirstEpoch(os.Stdout, res)
			out = append(out, res)
		}
		if err := srv.Unmount(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// r1Dataset prepares R1's dataset name (count files of size bytes, under
// the work directory), its mount point and its RAM tier's path, whose
// parent the caller removes.
func (e *env) r1Dataset(name string, count int, size int64) (ds *dlbench.Dataset, mnt, ram string, err error) {
	if ds, _, mnt, err = prepare(filepath.Join(e.work, name), dlbench.GenSpec{Layout: dlbench.LayoutImageFolder,
		Count: count, Size: size, Classes: 1, Seed: 1}); err != nil {
		return nil, "", "", err
	}
	ram, err = benchRAM(name)
	return ds, mnt, ram, err
}

func newFirstEpochResult(ds *dlbench.Dataset, size int64, direct bool, mode string) *firstEpochResult {
	return &firstEpochResult{DirectIO: direct, ReadMode: mode, Dataset: ds.Bytes, Files: ds.Files, FileSize: size,
		Seconds: map[string][][]float64{}, PFSBytes: map[string][][]int64{}}
}

// firstEpochRounds runs r1Rounds rounds of R1's configurations, one after
// the other, into res.
func (e *env) firstEpochRounds(srv *pfsemu.Server, ds *dlbench.Dataset, mnt, ram string, res *firstEpochResult, prog *dlbench.ProgressLine) error {
	for round := 0; round < r1Rounds; round++ {
		for _, cfg := range r1Configs {
			r, err := e.firstEpochRun(srv, ds, mnt, ram, cfg, res.ReadMode, res.DirectIO, prog)
			if err != nil {
				return fmt.Errorf("R1 %s %s: %w", cfg, res.ReadMode, err)
			}
			var secs []float64
			var bytes []int64
			for _, ep := range r.Epochs {
				secs = append(secs, ep.Seconds)
				bytes = append(bytes, ep.PFS.ReadBytes)
			}
			res.Seconds[cfg] = append(res.Seconds[cfg], secs)
			res.PFSBytes[cfg] = append(res.PFSBytes[cfg], bytes)
		}
	}
	return nil
}

// The other side of the reactive policy's rule for a client that keeps a
// page cache (wait_min, the client's read-ahead: 128 KiB on this FUSE
// mount): R1's reader over files of twice the read-ahead, which wait for
// their copy, where R1's 128 KiB files are read from the original.
const (
	r1MinFiles = 160
	r1MinSize  = 256 << 10
)

func (e *env) runWaitMinSide(prog *dlbench.ProgressLine) ([]*firstEpochResult, error) {
	fmt.Printf("\n== R1, wait_min's other side: %d files of %d KiB, 1 reader, client page cache, %d interleaved rounds\n", r1MinFiles, r1MinSize>>10, r1Rounds)
	ds, mnt, ram, err := e.r1Dataset("R1-256KiB", r1MinFiles, r1MinSize)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(ram))
	srv, err := pfsemu.Mount(pfsemu.DefaultOptions(ds.Root, mnt))
	if err != nil {
		return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
	}
	var out []*firstEpochResult
	for _, mode := range []string{dlbench.ReadWhole, dlbench.ReadPread, dlbench.ReadMmap} {
		res := newFirstEpochResult(ds, r1MinSize, false, mode)
		if err = e.firstEpochRounds(srv, ds, mnt, ram, res, prog); err != nil {
			break
		}
		printWaitMinSide(os.Stdout, res)
		out = append(out, res)
	}
	if uerr := srv.Unmount(); err == nil {
		err = uerr
	}
	return out, err
}

// printWaitMinSide prints R1 over files larger than the read-ahead.
func printWaitMinSide(w io.Writer, r *firstEpochResult) {
	fmt.Fprintf(w, "\nR1 wait_min side: %d files of %d KiB, %s reads, PFS with page cache (dropped between epochs): medians of %d interleaved rounds\n",
		r.Files, r.FileSize>>10, r.ReadMode, len(r.Seconds["pfs"]))
	printR1Table(w, r, "PFS bytes / dataset by epoch", "%.3f", float64(r.Dataset))
}

// The two sides of the reactive policy's rule (wait_max, 8 MiB by
// default): the first open of a file of at most wait_max bytes waits for
// its copy, a larger one reads the original at once while the queue
// copies it. A reader of each file's first 4 KiB (a header, as a loader
// of large records might read), over files of half and twice wait_max,
// with no client cache, where every byte fetched counts: under the
// threshold the reader waits for all of each file, which the PFS then
// serves once; over it, the reader waits for nothing more than without
// augur, and the PFS serves the file twice in the first epoch (the
// reader's 4 KiB and the queue's copy).
const r1SidesFiles = 16

var r1SidesSizes = []int64{4 << 20, 16 << 20}

func (e *env) runWaitMaxSides(prog *dlbench.ProgressLine) ([]*firstEpochResult, error) {
	fmt.Printf("\n== R1, wait_max's two sides: %d files of each size, a reader of each file's first 4 KiB, no client cache\n", r1SidesFiles)
	ram, err := benchRAM("R1-sides")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(ram))
	var out []*firstEpochResult
	for _, size := range r1SidesSizes {
		ds, _, mnt, err := prepare(filepath.Join(e.work, fmt.Sprintf("R1-%dMiB", size>>20)), dlbench.GenSpec{
			Layout: dlbench.LayoutImageFolder, Count: r1SidesFiles, Size: size, Classes: 1, Seed: 1})
		if err != nil {
			return nil, err
		}
		opts := pfsemu.DefaultOptions(ds.Root, mnt)
		opts.DirectIO = true
		srv, err := pfsemu.Mount(opts)
		if err != nil {
			return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
		}
		res := newFirstEpochResult(ds, size, true, dlbench.ReadHead)
		err = e.firstEpochRounds(srv, ds, mnt, ram, res, prog)
		if uerr := srv.Unmount(); err == nil {
			err = uerr
		}
		if err != nil {
			return nil, err
		}
		printWaitMaxSide(os.Stdout, res)
		out = append(out, res)
	}
	return out, nil
}

// benchRAM is a RAM tier's path for a run of this process: under
// /dev/shm, its parent made (augur makes the tier itself, not its
// parent); the caller removes the parent.
func benchRAM(name string) (string, error) {
	ram := filepath.Join("/dev/shm", fmt.Sprintf("augur-bench-%d", os.Getpid()), name)
	return ram, os.MkdirAll(filepath.Dir(ram), 0o700)
}

// printWaitMaxSide prints one side of wait_max: medians of each epoch's
// time and PFS bytes, no augur and reactive.
func printWaitMaxSide(w io.Writer, r *firstEpochResult) {
	fmt.Fprintf(w, "\nR1 wait_max side: %d files of %d MiB, first 4 KiB of each, PFS with direct I/O: medians of %d interleaved rounds\n",
		r.Files, r.FileSize>>20, len(r.Seconds["pfs"]))
	printR1Table(w, r, "PFS MB by epoch", "%.2f", 1e6)
}

// firstEpochRun runs one configuration of R1 once, cold: the page cache
// dropped and the tier empty.
func (e *env) firstEpochRun(srv *pfsemu.Server, ds *dlbench.Dataset, mnt, ram, cfg, mode string, direct bool, prog *dlbench.ProgressLine) (*dlbench.Result, error) {
	w := dlbench.DefaultWorkload()
	w.Ranks, w.Workers, w.Batch, w.Prefetch, w.ReadMode = 1, 0, 1, 1, mode
	x := dlbench.Exec{Reader: e.reader, Root: mnt,
		Counters: func() (pfsemu.Stats, error) { return srv.Stats(), nil }}
	if !direct {
		x.BetweenEpochs = dlbench.DropCaches
	}
	if cfg == "reactive" {
		if err := os.RemoveAll(ram); err != nil {
			return nil, err
		}
		job := fmt.Sprintf("bench-%d-R1", os.Getpid())
		defer removeJob(job)
		x.Wrapper = []string{e.augur, "run", "--"}
		x.Env = []string{"AUGUR_DATASET=" + mnt, "AUGUR_TIERS=" + ram + ":1GiB", "AUGUR_POLICY=reactive",
			"AUGUR_JOB=" + job, "AUGUR_CONFIG="}
	}
	if err := dlbench.DropCaches(); err != nil {
		return nil, err
	}
	x.Progress = prog.Func("R1 " + cfg + " " + mode)
	res, err := dlbench.Run(e.ctx, cfg, ds, w, x)
	prog.Clear()
	if err == nil {
		err = readErrors(res)
	}
	return res, err
}

// printFirstEpoch prints R1's medians for one mode: each epoch's time,
// its ratio to no augur, and the PFS bytes per epoch against the
// dataset.
func printFirstEpoch(w io.Writer, r *firstEpochResult) {
	mode := "page cache (dropped between epochs)"
	if r.DirectIO {
		mode = "direct I/O (no client cache)"
	}
	fmt.Fprintf(w, "\nR1 %s reads, PFS with %s: medians of %d interleaved rounds\n", r.ReadMode, mode, len(r.Seconds["pfs"]))
	printR1Table(w, r, "PFS bytes / dataset by epoch", "%.3f", float64(r.Dataset))
}

// printR1Table prints R1's configurations, medians over rounds: each
// epoch's time, epoch 1 against no augur's (in ratioFmt), and each
// epoch's PFS bytes divided by per, under the heading bytesHead.
func printR1Table(w io.Writer, r *firstEpochResult, bytesHead, ratioFmt string, per float64) {
	fmt.Fprintf(w, "| config | epoch 1 | epoch 2 | epoch 3 | epoch 1 x pfs | %s |\n|---|---|---|---|---|---|\n", bytesHead)
	base := medianAt(r.Seconds["pfs"], 0)
	for _, cfg := range r1Configs {
		row := []string{cfg}
		for ep := 0; ep < 3; ep++ {
			row = append(row, fmt.Sprintf("%.3f", medianAt(r.Seconds[cfg], ep)))
		}
		row = append(row, fmt.Sprintf(ratioFmt, medianAt(r.Seconds[cfg], 0)/base))
		var bytes []string
		for ep := 0; ep < 3; ep++ {
			bytes = append(bytes, fmt.Sprintf("%.2f", medianAt(r.PFSBytes[cfg], ep)/per))
		}
		row = append(row, strings.Join(bytes, " · "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// medianAt is the median over rounds of epoch ep's figure.
func medianAt[T int64 | float64](rounds [][]T, ep int) float64 {
	var v []float64
	for _, r := range rounds {
		if ep < len(r) {
			v = append(v, float64(r[ep]))
		}
	}
	return median(v)
}

// median is the median of v, 0 for none.
func median[T int64 | float64](in []T) float64 {
	if len(in) == 0 {
		return 0
	}
	v := make([]float64, len(in))
	for i, x := range in {
		v[i] = float64(x)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
