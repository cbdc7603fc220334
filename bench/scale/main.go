// Command scale measures what the clairvoyant leader and `augur plan` hold
// per dataset file (issue 11, item 6): the memory a job's leader needs
// grows with the dataset, and ImageNet-21k has 14 million files.
//
//	go run ./bench/scale [-files 1281000] [-small 12810] [-dir /dev/shm/augur-scale]
//
// It makes two ImageFolder datasets of 1-byte files (the file count is
// what costs memory, not the bytes), runs the same job over each, and
// prints the leader's peak and final RSS and the growth per file between
// them. The job is a process that reads, as rank 1 of 2 would (nothing
// tells augur so), the first samples of DistributedSampler's epoch 0 with seed 0
// through build/dlreader, then idling while the leader stats and places
// the rest: the leader lists the dataset, learns the rank, plans, and
// prefetches into a RAM tier of a quarter of the dataset. `augur plan`
// over the same datasets is measured by its maximum RSS (getrusage).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/augur-hpc/augur/seed"
)

const perClass = 640 // files per class directory; ImageNet has 1300, 21k about 650

func main() {
	files := flag.Int("files", 1281000, "files of the large dataset")
	small := flag.Int("small", 12800, "files of the small dataset (the baseline)")
	dir := flag.String("dir", "/dev/shm/augur-scale", "where the datasets are made (kept for the next run)")
	read := flag.Int("read", 4000, "samples the job reads before it idles")
	hold := flag.Duration("hold", 0, "how long the job idles after reading (default: until the leader has stat'ed every file, at most 10 min)")
	bin := flag.String("build", "build", "directory of augur, libaugur.so and dlreader")
	flag.Parse()
	if err := run(*files, *small, *dir, *read, *hold, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// measurement is one dataset's figures.
type measurement struct {
	files     int
	peak, end int64 // leader VmHWM and VmRSS at the end, bytes
	planPeak  int64 // augur plan's maximum RSS, bytes
	streams   string
}

func run(files, small int, dir string, read int, hold time.Duration, bin string) error {
	var ms []measurement
	for _, n := range []int{small, files} {
		root := filepath.Join(dir, fmt.Sprintf("ds-%d", n))
		t0 := time.Now()
		if err := generate(root, n); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale: dataset of %d files ready in %s (%s)\n", n, time.Since(t0).Round(time.Second), root)
		m, err := measure(bin, root, n, read, hold)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	fmt.Printf("%-10s %14s %14s %14s  %s\n", "files", "leader peak", "leader end", "plan peak", "what the leader learned")
	for _, m := range ms {
		fmt.Printf("%-10d %12.1f MB %12.1f MB %12.1f MB  %s\n", m.files, mb(m.peak), mb(m.end), mb(m.planPeak), m.streams)
	}
	d := float64(ms[1].files - ms[0].files)
	fmt.Printf("per file: leader peak %.0f B, leader end %.0f B, plan peak %.0f B (growth from %d to %d files)\n",
		float64(ms[1].peak-ms[0].peak)/d, float64(ms[1].end-ms[0].end)/d, float64(ms[1].planPeak-ms[0].planPeak)/d, ms[0].files, ms[1].files)
	return nil
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// generate makes an ImageFolder of n 1-byte files under root, classes of
// perClass files, unless a previous run made it (a stamp beside it).
func generate(root string, n int) error {
	stamp := root + ".done"
	if b, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(n) {
		return nil
	}
	os.Remove(stamp)
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	classes := (n + perClass - 1) / perClass
	work := make(chan int, 64)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := makeClass(root, c, min(perClass, n-c*perClass)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for c := 0; c < classes; c++ {
		work <- c
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return os.WriteFile(stamp, []byte(strconv.Itoa(n)), 0o644)
}

func className(c int) string { return fmt.Sprintf("n%08d", c) }

// samplePath is dataset index i's file: classes and names sort as they
// are numbered, so the ImageFolder index is the creation index.
func samplePath(root string, i int) string {
	c := i / perClass
	return filepath.Join(root, className(c), fmt.Sprintf("%s_%06d.JPEG", className(c), i%perClass))
}

func makeClass(root string, c, count int) error {
	if err := os.MkdirAll(filepath.Join(root, className(c)), 0o755); err != nil {
		return err
	}
	for k := 0; k < count; k++ {
		if err := os.WriteFile(samplePath(root, c*perClass+k), []byte{'x'}, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// measure runs the job over root under augur and augur plan over it.
func measure(bin, root string, n, read int, hold time.Duration) (measurement, error) {
	m := measurement{files: n}
	work, err := os.MkdirTemp("", "augur-scale-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(work)
	tier := fmt.Sprintf("/dev/shm/augur-scale-tier-%d", n)
	os.RemoveAll(tier)
	defer os.RemoveAll(tier)
	tierSpec := fmt.Sprintf("%s:%d", tier, n/4)

	// The job: rank 1 of 2 reads the head of its epoch-0 order.
	s, err := seed.New(seed.Spec{Sampler: seed.KindDistributed, Len: n, Replicas: 2, Rank: 1})
	if err != nil {
		return m, err
	}
	order := s.Epoch(0)[:min(read, n/2)]
	list, ord := filepath.Join(work, "list"), filepath.Join(work, "order")
	if err := writeJob(list, ord, root, order); err != nil {
		return m, err
	}
	job := fmt.Sprintf("scale-%d-%d", n, os.Getpid())
	if hold == 0 {
		hold = 10 * time.Minute
	}
	script := fmt.Sprintf("%s -R 1 -W 2 -B 64 -S %s %s >/dev/null && sleep %d",
		filepath.Join(bin, "dlreader"), list, ord, int(hold.Seconds()))
	cmd := exec.Command(filepath.Join(bin, "augur"), "run", "--policy", "clairvoyant",
		"--dataset", root, "--tier", tierSpec, "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "AUGUR_JOB="+job, "AUGUR_LOG=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return m, err
	}
	t0 := time.Now()
	for {
		time.Sleep(500 * time.Millisecond)
		m.peak, m.end = rss(cmd.Process.Pid)
		st, ok := stat(bin, job)
		if ok && st.done() || time.Since(t0) > hold {
			m.streams = st.summary()
			break
		}
	}
	m.peak, m.end = rss(cmd.Process.Pid)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	cmd.Wait()
	exec.Command(filepath.Join(bin, "augur"), "clean", "--tier", tierSpec).Run()

	plan := exec.Command(filepath.Join(bin, "augur"), "plan", "--quiet", "--policy", "clairvoyant",
		"--dataset", root, "--tier", tierSpec)
	plan.Stdout = nil
	if err := plan.Run(); err != nil {
		return m, fmt.Errorf("augur plan: %v", err)
	}
	m.planPeak = plan.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
	fmt.Fprintf(os.Stderr, "scale: %d files: leader peak %.1f MB, end %.1f MB, plan %.1f MB, %s\n",
		n, mb(m.peak), mb(m.end), mb(m.planPeak), m.streams)
	return m, nil
}

// writeJob writes dlreader's sample list (only the samples read) and
// order.
func writeJob(list, ord, root string, order []int) error {
	var l, o strings.Builder
	fmt.Fprintf(&o, "epochs 1 ranks 1\n0 0 %d", len(order))
	for k, i := range order {
		fmt.Fprintf(&l, "f 0 1 %s\n", samplePath(root, i))
		fmt.Fprintf(&o, " %d", k)
	}
	o.WriteByte('\n')
	if err := os.WriteFile(list, []byte(l.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(ord, []byte(o.String()), 0o644)
}

// rss reads a process's peak and current resident set.
func rss(pid int) (peak, now int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			peak = kb * 1024
		case "VmRSS":
			now = kb * 1024
		}
	}
	return peak, now
}

// jobStat is what the tool reads of augur stat --json.
type jobStat struct {
	Copies    uint64 `json:"copies"`
	Predicted uint64 `json:"predicted_files"`
	Sized     uint64 `json:"sized_files"`
	Staged    uint64 `json:"staged_files"`
	Tiers     []struct {
		Files uint64 `json:"files"`
	} `json:"tiers"`
	Streams []struct {
		Stream   string `json:"stream"`
		Sampler  string `json:"sampler"`
		Replicas int    `json:"world_size"`
		Rank     int    `json:"rank"`
		Epoch    int    `json:"epoch"`
		Why      string `json:"why"`
	} `json:"streams"`
}

func stat(bin, job string) (jobStat, bool) {
	var st jobStat
	out, err := exec.Command(filepath.Join(bin, "augur"), "stat", "--json", "--job", job).Output()
	return st, err == nil && json.Unmarshal(out, &st) == nil
}

// done says whether the leader has learned the stream and stat'ed every
// file.
func (st jobStat) done() bool {
	learned := len(st.Streams) > 0 && st.Streams[0].Sampler != ""
	return learned && st.Predicted > 0 && st.Sized == st.Predicted
}

func (st jobStat) summary() string {
	if len(st.Streams) == 0 {
		return "no stream"
	}
	s := st.Streams[0]
	if s.Sampler == "" {
		return s.Stream + ": " + s.Why
	}
	return fmt.Sprintf("%s: %s, world size %d, rank %d, epoch %d; %d copies", s.Stream, s.Sampler, s.Replicas, s.Rank, s.Epoch, st.Copies)
}
