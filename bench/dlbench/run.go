package dlbench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// Read modes: the libc call that reads a sample.
const (
	ReadWhole = "whole" // open, read until EOF, close (records: lseek + read)
	ReadPread = "pread" // open, fstat, pread (records: pread on a kept descriptor)
	ReadMmap  = "mmap"  // mmap and touch every page
	ReadHead  = "head"  // open, pread the first 4 KiB (a file's header), close (records: pread)
	// ReadStream reads records with read() on through their file, the
	// bytes between them read and dropped, one descriptor per worker, as
	// tarfile's stream mode and WebDataset do (whole files: as whole).
	ReadStream = "stream"
)

// Workload is what the readers do: the training loop's shape.
type Workload struct {
	Epochs   int    `json:"epochs"`
	Seed     int64  `json:"seed"`
	Sampler  string `json:"sampler"`         // a seed.Spec Sampler; "distributed" by default
	Ranks    int    `json:"ranks"`           // per node
	Nodes    int    `json:"nodes,omitempty"` // 0 or 1: one node; with more, Exec.Node says which this run is
	Workers  int    `json:"workers"`         // per rank; 0: the rank reads itself
	Batch    int    `json:"batch"`
	Prefetch int    `json:"prefetch"` // batches in flight per worker (PyTorch's prefetch_factor)
	// Compute is the time one batch computes; ComputeRate (bytes per
	// second) adds the batch's bytes at that rate. The compute loop
	// sleeps: an accelerator computes, the CPU is free.
	Compute     time.Duration `json:"compute_ns"`
	ComputeRate float64       `json:"compute_bytes_per_sec,omitempty"`
	ReadMode    string        `json:"read_mode"`
	NoIO        bool          `json:"no_io,omitempty"`
	// Order is how samples inside files are visited (OrderSamples,
	// OrderGroups, OrderShards); "" is OrderSamples. Group is the samples
	// of a group of OrderGroups (0: DefaultGroup).
	Order string `json:"order,omitempty"`
	Group int    `json:"group,omitempty"`
	// Verify makes the readers check every sample they read whole against
	// the CRC-32C of the dataset's bytes (Dataset.Checksum): a wrong byte
	// counts in Epoch.Corrupt.
	Verify bool `json:"verify,omitempty"`
	// NoSync lets ranks run apart; by default they meet after every step
	// as DDP's gradient all-reduce makes them.
	NoSync bool `json:"no_sync,omitempty"`
	// Startup is the time the job spends before its first read (imports,
	// building the model), doing no I/O. Not part of any epoch's time.
	Startup time.Duration `json:"startup_ns,omitempty"`
}

// DefaultWorkload is a small DDP job: 1 rank, 2 workers, batches of 32,
// 3 epochs, whole-file reads, DistributedSampler with seed 42.
func DefaultWorkload() Workload {
	return Workload{Epochs: 3, Seed: 42, Sampler: "distributed", Ranks: 1, Workers: 2, Batch: 32, Prefetch: 2,
		ReadMode: ReadWhole}
}

// Validate reports the first thing wrong with w.
func (w *Workload) Validate() error {
	switch {
	case w.Epochs < 1:
		return fmt.Errorf("epochs %d: need at least 1", w.Epochs)
	case w.Ranks < 1:
		return fmt.Errorf("ranks %d: need at least 1", w.Ranks)
	case w.Nodes < 0:
		return fmt.Errorf("nodes %d is negative", w.Nodes)
	case w.Workers < 0:
		return fmt.Errorf("workers %d is negative", w.Workers)
	case w.Batch < 1:
		return fmt.Errorf("batch %d: need at least 1", w.Batch)
	case w.Prefetch < 1:
		return fmt.Errorf("prefetch %d: need at least 1", w.Prefetch)
	case w.Compute < 0 || w.ComputeRate < 0:
		return errors.New("compute time and rate must not be negative")
	case w.Startup < 0:
		return errors.New("start-up time must not be negative")
	case w.ReadMode != ReadWhole && w.ReadMode != ReadPread && w.ReadMode != ReadMmap && w.ReadMode != ReadHead &&
		w.ReadMode != ReadStream:
		return fmt.Errorf("read mode %q: want whole, pread, mmap, head or stream", w.ReadMode)
	case w.Order != "" && w.Order != OrderSamples && w.Order != OrderGroups && w.Order != OrderShards:
		return fmt.Errorf("order %q: want %s, %s or %s", w.Order, OrderSamples, OrderGroups, OrderShards)
	case w.Group < 0:
		return fmt.Errorf("group %d is negative", w.Group)
	case w.Verify && w.ReadMode == ReadHead:
		return errors.New("verify: the head read mode reads part of each file, whose sum is of all of it")
	}
	return nil
}

// Describe is a one-line summary, like fio's job line.
func (w *Workload) Describe() string {
	c := fmt.Sprintf("compute %v/batch", w.Compute)
	if w.ComputeRate > 0 {
		c += fmt.Sprintf(" + %.0f MB/s", w.ComputeRate/1e6)
	}
	io := "read=" + w.ReadMode
	if w.NoIO {
		io = "no I/O"
	}
	d := fmt.Sprintf("%d rank(s) x %d worker(s), batch %d, prefetch %d, %s, %s, %d epochs, %s sampler seed %d",
		w.Ranks, w.Workers, w.Batch, w.Prefetch, c, io, w.Epochs, w.Sampler, w.Seed)
	if w.Order == OrderGroups {
		d += fmt.Sprintf(", groups of %d", cmp.Or(w.Group, DefaultGroup))
	} else if w.Order == OrderShards {
		d += ", shards"
	}
	if w.Verify {
		d += ", verified"
	}
	if w.Startup > 0 {
		d += fmt.Sprintf(", start-up %v", w.Startup)
	}
	if w.Nodes > 1 {
		d = fmt.Sprintf("%d nodes x ", w.Nodes) + d
	}
	return d
}

// Exec says how to run the readers.
type Exec struct {
	// Reader is the dlreader binary (see FindReader).
	Reader string
	// Root is where the readers find the dataset: its root, a mount of it
	// or a copy. Empty means the dataset's own root.
	Root string
	// Wrapper, when set, is a command the reader runs under, such as
	// {"augur", "run", "--", }: the reader's argv is appended.
	Wrapper []string
	// Preload is put in front of LD_PRELOAD; Env is added to the
	// environment (KEY=VALUE).
	Preload string
	Env     []string
	// Counters, when set, returns the emulated PFS's counters; it is
	// called before the reader starts and after each epoch.
	Counters func() (pfsemu.Stats, error)
	// BetweenEpochs, when set, runs after an epoch's counters are read
	// and before the next epoch starts, untimed (make bench drops the
	// page cache there).
	BetweenEpochs func() error
	// Progress, when set, is called while an epoch runs with the samples
	// done so far.
	Progress func(p Progress)
	// WorkDir holds the list, order and latency files; a temporary
	// directory when empty.
	WorkDir string
	// Node is which of Workload.Nodes this run is: its ranks are the
	// job's Node*Ranks to (Node+1)*Ranks-1, the launchers' block rule.
	Node int
	// StepBarrier, with Workload.Nodes > 1, is a file every node's reader
	// maps to keep all the job's ranks in step, as DDP does; the caller
	// removes it before the job starts. Empty: each node keeps its own
	// ranks in step only.
	StepBarrier string
}

// Progress is a running epoch's state.
type Progress struct {
	Epoch, Epochs int
	Done, Total   int64
	Elapsed       time.Duration // in this epoch
	Last          *Epoch        // the last finished epoch, nil in the first
}

// Run runs w over ds with x and returns what it measured. Every epoch's
// line is read as the reader prints it; the reader then waits until the
// PFS counters have been read, so each epoch's counters are its own.
func Run(ctx context.Context, name string, ds *Dataset, w Workload, x Exec) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	root := x.Root
	if root == "" {
		root = ds.Root
	}
	work := x.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "dlbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	list, order := filepath.Join(work, "list"), filepath.Join(work, "order")
	if w.Verify && !w.NoIO {
		if err := ds.Checksum(); err != nil {
			return nil, fmt.Errorf("checksums of the dataset: %w", err)
		}
	}
	if err := ds.WriteList(list, root, w.Verify && !w.NoIO); err != nil {
		return nil, err
	}
	orders, err := nodeOrders(w, x.Node, ds)
	if err != nil {
		return nil, err
	}
	if err := WriteOrder(order, orders); err != nil {
		return nil, err
	}
	argv := append(append([]string(nil), x.Wrapper...), x.Reader,
		"-R", strconv.Itoa(w.Ranks), "-W", strconv.Itoa(w.Workers), "-B", strconv.Itoa(w.Batch),
		"-P", strconv.Itoa(w.Prefetch), "-c", strconv.FormatInt(w.Compute.Microseconds(), 10),
		"-m", w.ReadMode, "-b", "-L", work)
	if w.ComputeRate > 0 {
		argv = append(argv, "-t", strconv.FormatFloat(w.ComputeRate/1e6, 'f', -1, 64))
	}
	if w.NoIO {
		argv = append(argv, "-n")
	}
	if w.Startup > 0 {
		argv = append(argv, "-s", strconv.FormatInt(w.Startup.Microseconds(), 10))
	}
	if w.NoSync {
		argv = append(argv, "-S")
	} else if w.Nodes > 1 && x.StepBarrier != "" {
		argv = append(argv, "-G", fmt.Sprintf("%s:%d", x.StepBarrier, w.Ranks*w.Nodes))
	}
	if x.Progress != nil {
		argv = append(argv, "-p")
	}
	argv = append(argv, list, order)

	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), x.Env...)
	if x.Preload != "" {
		pre := x.Preload
		if old := os.Getenv("LD_PRELOAD"); old != "" {
			pre += ":" + old
		}
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+pre)
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	res := &Result{Name: name, Workload: w, Dataset: ds.Describe(), Root: root, Preload: x.Preload}
	var prev pfsemu.Stats
	if x.Counters != nil {
		if prev, err = x.Counters(); err != nil {
			return nil, fmt.Errorf("PFS counters: %w", err)
		}
	}
	start := time.Now()
	var between time.Duration // spent in x.BetweenEpochs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	epochStart := start
	var perr error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() && perr == nil {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "progress" && x.Progress != nil:
			e, _ := strconv.Atoi(f[1])
			done, _ := strconv.ParseInt(f[2], 10, 64)
			total, _ := strconv.ParseInt(f[3], 10, 64)
			p := Progress{Epoch: e, Epochs: w.Epochs, Done: done, Total: total, Elapsed: time.Since(epochStart)}
			if n := len(res.Epochs); n > 0 {
				p.Last = &res.Epochs[n-1]
			}
			x.Progress(p)
		case len(f) > 0 && f[0] == "epoch":
			var ep *Epoch
			if ep, perr = parseEpoch(f); perr != nil {
				break
			}
			if !w.NoIO {
				lat, err := readLatencies(filepath.Join(work, fmt.Sprintf("lat-%d.bin", ep.Epoch)))
				if err != nil {
					perr = err
					break
				}
				ep.Latency = Percentiles(lat)
			}
			if x.Counters != nil {
				now, err := x.Counters()
				if err != nil {
					perr = fmt.Errorf("PFS counters: %w", err)
					break
				}
				d := subStats(now, prev)
				ep.PFS, prev = &d, now
			}
			res.Epochs = append(res.Epochs, *ep)
			if x.BetweenEpochs != nil {
				t := time.Now()
				err := x.BetweenEpochs()
				between += time.Since(t) // the harness's, not the job's
				if err != nil {
					perr = err
					break
				}
			}
			epochStart = time.Now()
			io.WriteString(stdin, "next\n") // an error here shows up as the reader's exit
		}
	}
	stdin.Close()
	if perr != nil {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	res.Seconds = (time.Since(start) - between).Seconds()
	res.Overhead = res.Seconds - res.TotalSeconds()
	res.Stderr = stderr.String()
	switch {
	case perr != nil:
		return res, perr
	case werr != nil:
		return res, fmt.Errorf("reader: %v%s", werr, indentTail(res.Stderr))
	case len(res.Epochs) != w.Epochs:
		return res, fmt.Errorf("reader reported %d epochs of %d%s", len(res.Epochs), w.Epochs, indentTail(res.Stderr))
	}
	return res, nil
}

// nodeOrders is what node's ranks read: their part of the orders of the
// job's Nodes*Ranks ranks over ds.
func nodeOrders(w Workload, node int, ds *Dataset) ([][][]int, error) {
	nodes := max(w.Nodes, 1)
	if node < 0 || node >= nodes {
		return nil, fmt.Errorf("node %d of a job of %d node(s)", node, nodes)
	}
	orders, err := jobOrders(w, ds, w.Ranks*nodes)
	if err != nil {
		return nil, err
	}
	for e := range orders {
		orders[e] = orders[e][node*w.Ranks : (node+1)*w.Ranks]
	}
	return orders, nil
}

// parseEpoch reads "epoch E samples N bytes B wall_ns T stall_ns S
// stall_max_ns M sync_ns Y errors X corrupt C" (corrupt may be missing:
// a reader from before sums).
func parseEpoch(f []string) (*Epoch, error) {
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("reader: bad epoch line %q", strings.Join(f, " "))
	}
	v := map[string]int64{}
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reader: bad epoch line %q", strings.Join(f, " "))
		}
		v[f[i]] = n
	}
	for _, k := range []string{"epoch", "samples", "bytes", "wall_ns", "stall_ns", "stall_max_ns", "sync_ns", "errors"} {
		if _, ok := v[k]; !ok {
			return nil, fmt.Errorf("reader: epoch line %q lacks %s", strings.Join(f, " "), k)
		}
	}
	ep := &Epoch{Epoch: int(v["epoch"]), Samples: v["samples"], Bytes: v["bytes"],
		Seconds: float64(v["wall_ns"]) / 1e9, Stall: float64(v["stall_ns"]) / 1e9,
		StallMax: float64(v["stall_max_ns"]) / 1e9, Sync: float64(v["sync_ns"]) / 1e9, Errors: v["errors"],
		Corrupt: v["corrupt"]}
	if ep.Seconds > 0 {
		ep.SamplesPerSec = float64(ep.Samples) / ep.Seconds
		ep.MBPerSec = float64(ep.Bytes) / ep.Seconds / 1e6
	}
	return ep, nil
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 64<<10 {
		t.b = t.b[len(t.b)-64<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func indentTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "\n\t" + strings.Join(lines, "\n\t")
}

// StatsFileCounters returns a Counters function reading the stats file of
// an `augur pfsemu` running elsewhere. The file is rewritten every stats
// interval, so each call waits (up to wait) for a version written after
// the call began.
func StatsFileCounters(name string, wait time.Duration) func() (pfsemu.Stats, error) {
	return func() (pfsemu.Stats, error) {
		called := time.Now()
		deadline := called.Add(wait)
		for {
			fi, err := os.Stat(name)
			if err == nil && fi.ModTime().After(called) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		var st pfsemu.Stats
		data, err := os.ReadFile(name)
		if err != nil {
			return st, err
		}
		if err := json.Unmarshal(bytes.TrimSpace(data), &st); err != nil {
			return st, fmt.Errorf("%s: %v", name, err)
		}
		return st, nil
	}
}
