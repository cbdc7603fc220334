package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/augur-hpc/augur/bench/dlbench"
	"github.com/augur-hpc/augur/bench/netlab"
	"github.com/augur-hpc/augur/bench/pfsemu"
	"github.com/augur-hpc/augur/placement"
	"github.com/augur-hpc/augur/shim"
)

// S4 is a job of several nodes (issue 12): each node a network namespace
// (bench/netlab) whose link to the others is rate-limited both ways, with
// a mount namespace of its own whose private /dev/shm holds its tier and
// its leader's segment, running one rank of the job's DistributedSampler.
// All read one emulated PFS with direct I/O, as separate nodes share no
// page cache. The dataset is larger than one node's tier and smaller
// than all of them together. The ranks of all nodes keep in step, as
// DDP's all-reduce keeps them, and epochs are aligned: every node
// finishes an epoch before any starts the next, so the PFS counters and
// the peers' traffic are the epoch's own.

// nodeSpec is S4's set-up, before scaling.
const (
	s4Nodes = 4
	s4Bytes = 160 * mib
	s4Size  = 64 << 10
	s4Tier  = s4Bytes * 35 / 100 // per node: 1.4x the dataset in all
	s4Link  = 50e6               // bytes/s each way per node (400 Mbit/s)
	// s4Bandwidth is the PFS's, shared by all nodes. Four nodes and the
	// emulator share this host's two processors, which a cluster's
	// nodes do not: at 100 MiB/s augur's first epochs kept them 82-88%
	// busy (the emulator's FUSE server the most of it), and the host,
	// not the PFS, set the pace. At half that the PFS does, as on a
	// cluster (each epoch's host_cpu_busy says how far).
	s4Bandwidth = 50 * mib
)

// s4Workload is each node's loop: one rank of 2 workers, batches of 16,
// 20 ms of compute per batch.
func s4Workload() dlbench.Workload {
	w := dlbench.DefaultWorkload()
	w.Nodes, w.Ranks, w.Workers, w.Batch, w.Compute = s4Nodes, 1, 2, 16, 20*time.Millisecond
	return w
}

// nodeConfig is one way of running S4.
type nodeConfig struct {
	name, about string
	read        string // "pfs" or "local"
	policy      string // augur's policy, or none
	peers       bool
}

var nodeConfigs = []nodeConfig{
	{name: "pfs", read: "pfs", about: "no shim: every node reads the emulated PFS"},
	{name: "local", read: "local", about: "a local copy on every node beforehand: the limit"},
	{name: "reactive+peers", read: "pfs", policy: "reactive", peers: true,
		about: "copy on first read; a file's owner (a hash of its path) serves the others (HVAC)"},
	{name: "clairvoyant", read: "pfs", policy: "clairvoyant", about: "prefetch in seed order, each node alone"},
	{name: "clairvoyant+peers", read: "pfs", policy: "clairvoyant", peers: true,
		about: "prefetch in seed order, from the node that holds the file or the PFS (NoPFS)"},
}

// nodesResult is S4's outcome.
type nodesResult struct {
	Nodes     int     `json:"nodes"`
	Dataset   string  `json:"dataset"`
	Bytes     int64   `json:"dataset_bytes"`
	TierBytes int64   `json:"tier_bytes_per_node"`
	LinkRate  float64 `json:"link_bytes_per_second"`
	PFS       string  `json:"pfs"`
	// PlanPeerBytes and PlanPFSBytes are what augur plan --nodes expects
	// to go between the nodes and to come from the PFS (with peers) in
	// each epoch: the links' and the PFS's parts of the bound.
	PlanPeerBytes []int64     `json:"plan_peer_bytes"`
	PlanPFSBytes  []int64     `json:"plan_pfs_bytes"`
	PFSBandwidth  float64     `json:"pfs_bytes_per_second"`
	Runs          []*nodesRun `json:"runs"`
	Seconds       float64     `json:"seconds"`
}

// nodesRun is one configuration's epochs, the job's view: the slowest
// node's time, the mean stall, bytes from the PFS and between nodes,
// medians of its rounds.
type nodesRun struct {
	Config string            `json:"config"`
	About  string            `json:"about"`
	Epochs []nodesEpoch      `json:"epochs,omitempty"`
	Error  string            `json:"error,omitempty"`
	Stats  []json.RawMessage `json:"augur_stat,omitempty"` // per node, after the last epoch of the last round
	Notes  []string          `json:"notes,omitempty"`
	// Rounds are each round's epoch times (s4Rounds); Epochs holds their
	// medians.
	Rounds [][]float64 `json:"rounds,omitempty"`
}

type nodesEpoch struct {
	Epoch     int     `json:"epoch"`
	Seconds   float64 `json:"seconds"`
	Stall     float64 `json:"stall_seconds"`
	PFSBytes  int64   `json:"pfs_bytes"`
	PeerBytes int64   `json:"peer_bytes"` // received by all nodes
	Bound     float64 `json:"bound_seconds,omitempty"`
	// HostBusy is the share of the host's processors that were busy in
	// the epoch (the first from the nodes' start): four nodes share this
	// host's, so where it nears 1 the host, not the emulated PFS or
	// links, sets the pace.
	HostBusy float64 `json:"host_cpu_busy,omitempty"`
}

// runNodes runs S4.
func (e *env) runNodes(policies map[string]string, prog *dlbench.ProgressLine) (*nodesResult, error) {
	if err := checkS4Configs(); err != nil {
		return nil, err
	}
	start := time.Now()
	dir := filepath.Join(e.work, "S4")
	count := int(e.sized(s4Bytes) / s4Size)
	w := s4Workload()
	fmt.Printf("\n== S4: %d nodes, links %.0f MB/s each way, each node's tier %s (%d samples, ~%s)\n",
		s4Nodes, s4Link/1e6, fmtMiB(e.sized(s4Tier)), count, fmtMiB(e.sized(s4Bytes)))
	ds, local, mnt, err := prepare(dir, dlbench.GenSpec{Layout: dlbench.LayoutImageFolder,
		Count: count, Size: s4Size, SizeStddev: s4Size / 4, Classes: 10, Seed: 4})
	if err != nil {
		return nil, err
	}
	popts := pfsemu.DefaultOptions(ds.Root, mnt)
	popts.Bandwidth, popts.DirectIO = s4Bandwidth, true
	srv, err := pfsemu.Mount(popts)
	if err != nil {
		return nil, fmt.Errorf("mounting the emulated PFS: %w", err)
	}
	defer func() { srv.Unmount() }()
	lab, err := netlab.New(s4Nodes, s4Link)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	nr := &nodesResult{Nodes: s4Nodes, Dataset: ds.Describe(), Bytes: ds.Bytes, TierBytes: e.sized(s4Tier),
		LinkRate: s4Link, PFS: fmt.Sprintf("%s shared, direct I/O", pfsemu.FormatRate(popts.Bandwidth))}
	s := &s4{e: e, ds: ds, w: w, lab: lab, dir: dir, mnt: mnt, local: local, tier: nr.TierBytes,
		counters: srv.Stats, prog: prog}
	nr.PFSBandwidth = float64(popts.Bandwidth)
	if nr.PlanPeerBytes, nr.PlanPFSBytes, err = s.planBytes(); err != nil {
		return nil, fmt.Errorf("augur plan: %w", err)
	}
	rounds := map[string][]*nodesRun{}
	for round := range s4Rounds {
		for _, c := range nodeConfigs {
			if !s4Selected(c.name) {
				continue
			}
			r := &nodesRun{Config: c.name, About: c.about}
			if c.policy != "" && policies[c.policy] != "available" {
				r.Error = policies[c.policy]
			} else if err := s.run(c, r); err != nil {
				r.Error = err.Error()
			}
			if r.Error != "" {
				fmt.Printf("  %-20s round %d failed: %s\n", c.name, round+1, firstLine(r.Error))
			} else {
				fmt.Printf("  %-20s round %d, epochs %s\n", c.name, round+1, nodeEpochList(r))
			}
			rounds[c.name] = append(rounds[c.name], r)
		}
	}
	for _, c := range nodeConfigs {
		if rs := rounds[c.name]; len(rs) > 0 {
			nr.Runs = append(nr.Runs, medianRun(rs))
		}
	}
	nr.bound()
	nr.Seconds = time.Since(start).Seconds()
	return nr, nil
}

// s4Rounds is how many times each configuration of S4 runs, one after
// the other (a round runs each once): four nodes on two processors move
// by 10-20% from run to run, and one run of each ranked configurations
// whose totals differ by less than that as the run fell.
const s4Rounds = 3

// medianRun is a configuration's rounds as one run: each epoch's figures
// the medians over the rounds (each figure's own), every round's epoch
// times beside them, and the last round's augur stat and notes. A round
// that failed is the result.
func medianRun(rounds []*nodesRun) *nodesRun {
	for _, r := range rounds {
		if r.Error != "" {
			return r
		}
	}
	last := rounds[len(rounds)-1]
	out := &nodesRun{Config: last.Config, About: last.About, Stats: last.Stats, Notes: last.Notes}
	for e := range last.Epochs {
		var secs, stall, busy []float64
		var pfs, peer []int64
		for _, r := range rounds {
			if e < len(r.Epochs) {
				ep := r.Epochs[e]
				secs, stall, busy = append(secs, ep.Seconds), append(stall, ep.Stall), append(busy, ep.HostBusy)
				pfs, peer = append(pfs, ep.PFSBytes), append(peer, ep.PeerBytes)
			}
		}
		out.Epochs = append(out.Epochs, nodesEpoch{Epoch: last.Epochs[e].Epoch, Seconds: median(secs),
			Stall: median(stall), PFSBytes: int64(median(pfs)), PeerBytes: int64(median(peer)), HostBusy: median(busy)})
	}
	for _, r := range rounds {
		var secs []float64
		for _, ep := range r.Epochs {
			secs = append(secs, ep.Seconds)
		}
		out.Rounds = append(out.Rounds, secs)
	}
	return out
}

// s4Configs, when set, are the only S4 configurations run (-s4-configs).
var s4Configs string

func s4Selected(name string) bool {
	return s4Configs == "" || strings.Contains(","+s4Configs+",", ","+name+",")
}

// checkS4Configs names a configuration in -s4-configs that S4 does not
// have: a typo would otherwise run nothing.
func checkS4Configs() error {
	if s4Configs == "" {
		return nil
	}
	var names []string
	for _, c := range nodeConfigs {
		names = append(names, c.name)
	}
	for _, n := range strings.Split(s4Configs, ",") {
		if !slices.Contains(names, n) {
			return fmt.Errorf("-s4-configs: no configuration %q; S4 has %s", n, strings.Join(names, ", "))
		}
	}
	return nil
}

// s4 is what every run of S4 shares.
type s4 struct {
	e               *env
	ds              *dlbench.Dataset
	w               dlbench.Workload
	lab             *netlab.Lab
	dir, mnt, local string
	tier            int64
	counters        func() pfsemu.Stats
	prog            *dlbench.ProgressLine
	nodePIDs        []int // the nodes' processes, for augur stat in their namespaces
	job, rendezvous string
	statPrev        []shim.Stats
}

// augurEnv is node i's augur configuration in configuration c.
func (s *s4) augurEnv(c nodeConfig, i int) []string {
	env := []string{"AUGUR_DATASET=" + s.mnt, fmt.Sprintf("AUGUR_TIERS=/dev/shm/augur-s4:%d", s.tier),
		"AUGUR_POLICY=" + c.policy, fmt.Sprintf("AUGUR_SEED=%d", s.w.Seed), "AUGUR_JOB=" + s.job, "AUGUR_CONFIG=",
		fmt.Sprintf("AUGUR_WORLD_SIZE=%d", s.w.Ranks*s.w.Nodes), fmt.Sprintf("AUGUR_RANKS_PER_NODE=%d", s.w.Ranks),
		fmt.Sprintf("AUGUR_NODE_RANK=%d", i), fmt.Sprintf("AUGUR_BATCH_SIZE=%d", s.w.Batch),
		fmt.Sprintf("AUGUR_EPOCHS=%d", s.w.Epochs), fmt.Sprintf("AUGUR_LOG=warn:%s/node%d.log", s.dir, i)}
	if c.peers {
		// The nodes meet through a rendezvous directory on a shared
		// filesystem, each listening on its own address, any port.
		env = append(env, fmt.Sprintf("AUGUR_NODES=%d", s.w.Nodes), "AUGUR_RENDEZVOUS="+s.rendezvous,
			"AUGUR_PEER_LISTEN="+s.lab.Hosts[i].Addr+":0")
	}
	return env
}

// planBytes asks augur plan --nodes what the job's nodes should send each
// other, and read from the PFS, in each epoch.
func (s *s4) planBytes() (peer, pfs []int64, err error) {
	tier := filepath.Join(s.dir, "plan-tier")
	if err := os.MkdirAll(tier, 0o755); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(s.e.augur, "plan", "--nodes", strconv.Itoa(s.w.Nodes), "--json", "--quiet")
	cmd.Env = append(append(os.Environ(), s.augurEnv(nodeConfig{policy: "clairvoyant"}, 0)...),
		fmt.Sprintf("AUGUR_TIERS=%s:%d", tier, s.tier))
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %s", err, stderrOf(err))
	}
	var plan struct {
		Epochs []placement.JobEpoch `json:"epochs"`
	}
	if err := json.Unmarshal(out, &plan); err != nil {
		return nil, nil, err
	}
	for _, ep := range plan.Epochs {
		peer, pfs = append(peer, ep.PeerBytes), append(pfs, ep.PFSBytesPeers)
	}
	return peer, pfs, nil
}

func stderrOf(err error) string {
	var x *exec.ExitError
	if errors.As(err, &x) {
		return strings.TrimSpace(string(x.Stderr))
	}
	return ""
}

// run runs configuration c on every node at once into r.
func (s *s4) run(c nodeConfig, r *nodesRun) error {
	s.job = fmt.Sprintf("bench-%d-s4-%s", os.Getpid(), strings.ReplaceAll(c.name, "+", "-"))
	s.rendezvous = filepath.Join(s.dir, "rendezvous")
	os.RemoveAll(s.rendezvous)
	defer os.RemoveAll(s.rendezvous)
	if err := dlbench.DropCaches(); err != nil {
		return err
	}
	n := s.w.Nodes
	s.nodePIDs = make([]int, n)
	s.statPrev = make([]shim.Stats, n)
	if err := os.Remove(s.steps()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for i := range n {
		os.Remove(s.statFile(i))
	}
	b := newEpochBarrier(n)
	prev, cpuPrev := s.counters(), readHostCPU()
	b.last = func(epoch int) {
		now, cpuNow := s.counters(), readHostCPU()
		d := dlbench.SubStats(now, prev)
		ep := nodesEpoch{Epoch: epoch, PFSBytes: d.ReadBytes, HostBusy: cpuNow.busySince(cpuPrev)}
		prev, cpuPrev = now, cpuNow
		if c.policy != "" && epoch < s.w.Epochs {
			ep.PeerBytes = s.peerBytesIn(r, s.liveStat)
		}
		r.Epochs = append(r.Epochs, ep)
	}
	results := make([]*dlbench.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.node(c, i, b)
			if errs[i] != nil {
				b.abort()
			}
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res != nil && strings.TrimSpace(res.Stderr) != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("node %d said: %s", i, strings.TrimSpace(res.Stderr)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.policy != "" && len(r.Epochs) > 0 {
		last := &r.Epochs[len(r.Epochs)-1]
		last.PeerBytes = s.peerBytesIn(r, s.finalStat)
		for i := range n {
			if b, err := os.ReadFile(s.statFile(i)); err == nil && json.Valid(b) {
				r.Stats = append(r.Stats, json.RawMessage(b))
			}
		}
	}
	for e := range r.Epochs {
		for _, res := range results {
			ep := res.Epochs[e]
			r.Epochs[e].Seconds = max(r.Epochs[e].Seconds, ep.Seconds)
			r.Epochs[e].Stall += ep.Stall / float64(n)
		}
	}
	return nil
}

// node runs node i's readers in its namespaces: a mount namespace with a
// private /dev/shm inside host i's network namespace.
func (s *s4) node(c nodeConfig, i int, b *epochBarrier) (*dlbench.Result, error) {
	pidFile := filepath.Join(s.dir, fmt.Sprintf("node%d.pid", i))
	os.Remove(pidFile)
	// The shell stays, so that augur stat can enter its namespace
	// between epochs, and takes the last augur stat after the readers.
	script := `echo $$ >"$0" && mount -t tmpfs tmpfs /dev/shm || exit 1; "$@"; rc=$?`
	x := dlbench.Exec{Reader: s.e.reader, Root: s.mnt, Node: i, WorkDir: filepath.Join(s.dir, fmt.Sprintf("work%d", i)),
		StepBarrier: s.steps()}
	if err := os.MkdirAll(x.WorkDir, 0o755); err != nil {
		return nil, err
	}
	if c.read == "local" {
		x.Root = s.local
	}
	var augur []string
	if c.policy != "" {
		augur = []string{s.e.augur, "run", "--"}
		x.Env = s.augurEnv(c, i)
		script += fmt.Sprintf(`; %s stat --json --job %s >%s`, shellQuote(s.e.augur), shellQuote(s.job), shellQuote(s.statFile(i)))
	}
	x.Wrapper = append([]string{"ip", "netns", "exec", s.lab.Hosts[i].NS, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", script + "; exit $rc", pidFile}, augur...)
	x.BetweenEpochs = func() error {
		if s.nodePIDs[i] == 0 {
			pid, err := os.ReadFile(pidFile)
			if err != nil {
				return err
			}
			s.nodePIDs[i], _ = strconv.Atoi(strings.TrimSpace(string(pid)))
		}
		return b.wait()
	}
	if i == 0 {
		x.Progress = s.prog.Func("S4 " + c.name + " node 0")
		defer s.prog.Clear()
	}
	res, err := dlbench.Run(s.e.ctx, c.name, s.ds, s.w, x)
	if err == nil {
		err = readErrors(res)
	}
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	return res, nil
}

// peerBytesIn returns the bytes the nodes received from each other since
// the last call, from each node's augur stat as stat gives it. The
// counters are published every half second, so an epoch's last fraction
// of a second may count in the next.
func (s *s4) peerBytesIn(r *nodesRun, stat func(i int) ([]byte, error)) int64 {
	var sum int64
	for i := range s.w.Nodes {
		out, err := stat(i)
		var st shim.Stats
		if err == nil {
			err = json.Unmarshal(out, &st)
		}
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("augur stat on node %d: %v %s", i, err, stderrOf(err)))
			continue
		}
		sum += int64(st.PeerBytesIn - s.statPrev[i].PeerBytesIn)
		s.statPrev[i] = st
	}
	return sum
}

// liveStat is node i's augur stat now, taken in its mount namespace.
func (s *s4) liveStat(i int) ([]byte, error) {
	return exec.Command("nsenter", "-t", strconv.Itoa(s.nodePIDs[i]), "-m", s.e.augur, "stat", "--json", "--job", s.job).Output()
}

// finalStat is the augur stat node i took after its readers ended.
func (s *s4) finalStat(i int) ([]byte, error) { return os.ReadFile(s.statFile(i)) }

// steps is the file of the nodes' step barrier (DDP's all-reduce).
func (s *s4) steps() string { return filepath.Join(s.dir, "steps") }

func (s *s4) statFile(i int) string { return filepath.Join(s.dir, fmt.Sprintf("node%d.stat.json", i)) }

// bound sets each epoch's bound: the longest of the local copy's time
// (compute and the readers' own work), the time the links need for what
// the plan sends between nodes, and the time the PFS needs at its
// configured bandwidth for what the plan reads from it with peers (the
// whole dataset in the first epoch).
func (nr *nodesResult) bound() {
	if nr == nil {
		return
	}
	local := findNodes(nr.Runs, "local")
	if local == nil {
		return
	}
	for _, r := range nr.Runs {
		if r == local {
			for e := range r.Epochs {
				r.Epochs[e].Bound = 0 // the limit itself: it reads no PFS
			}
			continue
		}
		for e := range r.Epochs {
			if e >= len(local.Epochs) {
				break
			}
			b := local.Epochs[e].Seconds
			if e < len(nr.PlanPeerBytes) && e < len(nr.PlanPFSBytes) {
				b = max(b, float64(nr.PlanPeerBytes[e])/float64(nr.Nodes)/nr.LinkRate,
					float64(nr.PlanPFSBytes[e])/nr.PFSBandwidth)
			}
			r.Epochs[e].Bound = b
		}
	}
}

func findNodes(runs []*nodesRun, name string) *nodesRun {
	for _, r := range runs {
		if r.Config == name && r.Error == "" && len(r.Epochs) > 0 {
			return r
		}
	}
	return nil
}

func nodeEpochList(r *nodesRun) string {
	var parts []string
	for _, ep := range r.Epochs {
		parts = append(parts, fmt.Sprintf("%.2fs", ep.Seconds))
	}
	return strings.Join(parts, " ")
}

// printNodes prints S4's table: one row per configuration and epoch.
func printNodes(w io.Writer, nr *nodesResult) {
	if nr == nil {
		return
	}
	rounds := ""
	if len(nr.Runs) > 0 && len(nr.Runs[0].Rounds) > 1 {
		rounds = fmt.Sprintf("; medians of %d interleaved rounds", len(nr.Runs[0].Rounds))
	}
	fmt.Fprintf(w, "\nS4: %d nodes, 1 rank each — %s; each node's tier %s (%.1fx the dataset in all); links %.0f MB/s each way; PFS %s%s\n",
		nr.Nodes, nr.Dataset, fmtMiB(nr.TierBytes), float64(nr.TierBytes)*float64(nr.Nodes)/float64(nr.Bytes), nr.LinkRate/1e6, nr.PFS, rounds)
	fmt.Fprintf(w, "| config | epoch | time (s) | bound (s) | x bound | stall (s) | PFS MB | peer MB | host CPU busy | PFS x dataset, all epochs |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range nr.Runs {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | failed: %s |\n", r.Config, firstLine(r.Error))
			continue
		}
		var pfs int64
		for _, ep := range r.Epochs {
			pfs += ep.PFSBytes
		}
		for i, ep := range r.Epochs {
			total := ""
			if i == len(r.Epochs)-1 {
				total = fmt.Sprintf("%.2f", float64(pfs)/float64(nr.Bytes))
			}
			bound := "-"
			if ep.Bound > 0 {
				bound = fmt.Sprintf("%.2f", ep.Bound)
			}
			busy := "-" // not recorded (an older bench.json, or /proc/stat unread)
			if ep.HostBusy > 0 {
				busy = fmt.Sprintf("%.0f%%", 100*ep.HostBusy)
			}
			fmt.Fprintf(w, "| %s | %d | %.2f | %s | %s | %.2f | %.1f | %.1f | %s | %s |\n", r.Config, ep.Epoch, ep.Seconds,
				bound, ratio(ep.Seconds, ep.Bound), ep.Stall, float64(ep.PFSBytes)/1e6, float64(ep.PeerBytes)/1e6, busy, total)
		}
	}
}

// epochBarrier holds every node after an epoch until all have finished
// it; the last to arrive runs last first. abort releases everyone for
// good (a node failed).
type epochBarrier struct {
	mu      sync.Mutex
	n, in   int
	epoch   int
	release chan struct{}
	aborted chan struct{}
	once    sync.Once
	last    func(epoch int)
}

func newEpochBarrier(n int) *epochBarrier {
	return &epochBarrier{n: n, release: make(chan struct{}), aborted: make(chan struct{})}
}

// wait returns when every node has arrived, or with an error when a node
// failed or nothing happened for two minutes.
func (b *epochBarrier) wait() error {
	b.mu.Lock()
	b.in++
	rel := b.release
	if b.in == b.n {
		b.epoch++
		if b.last != nil {
			b.last(b.epoch)
		}
		b.in = 0
		b.release = make(chan struct{})
		close(rel)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	select {
	case <-rel:
		return nil
	case <-b.aborted:
		return errors.New("another node failed")
	case <-time.After(2 * time.Minute):
		return errors.New("the other nodes did not finish the epoch in 2 minutes")
	}
}

func (b *epochBarrier) abort() { b.once.Do(func() { close(b.aborted) }) }

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hostCPU is the host's processor time so far, in clock ticks
// (/proc/stat's first line): busy, and in all.
type hostCPU struct{ busy, total uint64 }

// readHostCPU reads the host's processor time; zero where /proc/stat
// cannot be read or parsed (busySince then says 0).
func readHostCPU() hostCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return hostCPU{}
	}
	// user nice system idle iowait irq softirq steal (guest time is
	// counted in user already).
	var c hostCPU
	for k, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return hostCPU{}
		}
		c.total += n
		if k != 3 && k != 4 { // idle, iowait
			c.busy += n
		}
	}
	return c
}

// busySince is the share of the processors' time busy since prev.
func (c hostCPU) busySince(prev hostCPU) float64 {
	if prev.total == 0 || c.total <= prev.total {
		return 0
	}
	return float64(c.busy-prev.busy) / float64(c.total-prev.total)
}
