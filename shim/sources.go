package shim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Sources worth no copy (issue 44). A dataset root whose files a reader
// gets about as fast from the root as from the tier a copy would go to
// (a page cache that holds the dataset, a local NVMe, a tmpfs) is passed
// through: no copy of its files is made, no reader waits for one or tees
// it, no large file of it is tiered in blocks; the copies the tiers hold
// already are served as before. What decides is measured, on this node,
// as a reader meets it: every probeEvery the leader reads whole the file
// of the root opened from its original longest ago among the last
// probeFiles, once (the state a reader finds a file in when it comes
// back to it: still in the page cache, or not), its first probeBytes, and
// right after a file of as many bytes in the tier, made for the probes:
// both under the same load of the node. The median of the
// last probes' ratios, source over tier, decides: at most passBelow, the
// root is passed through; at least copyAbove, its files are copied again
// (a page cache dropped, a shared filesystem slowed down).
type sources struct {
	l    *Leader
	tier *tiering.Tree // the fastest tier this leader writes
	// read times a read of a file's first bytes (tiering.ReadTime; a
	// test's own).
	read func(path string, size int64) (time.Duration, error)
	// decided is told when a root is first judged, and whether it is
	// passed through (the reactive policy's held copies); called with mu
	// held.
	decided func(root string, pass bool)
	// kick wakes the prober at a root's first open: while it is not
	// judged its first readers neither wait nor tee, so the first probe
	// (which alone judges a slow root) comes at once.
	kick chan struct{}

	mu     sync.Mutex
	by     []*source                  // one per root; guarded by mu
	probes map[int64]string           // the tier's files read beside a source's, by size; guarded by mu
	saved  struct{ wait, tee uint64 } // wait_max and tee_max while every root passes; guarded by mu
	held   bool                       // they are zero for that; guarded by mu
}

// source is what is known of one root.
type source struct {
	root   string
	recent []string // files opened from their originals lately, a ring
	next   int      // the oldest of recent, once it is full
	ratios []float64
	judged bool // the probes decided once
	pass   bool
	src    time.Duration // the last probe's times
	tier   time.Duration
	size   int64
	probes int
}

const (
	probeEvery  = 250 * time.Millisecond
	probeFirst  = 50 * time.Millisecond
	probeFiles  = 256 // files opened lately a probe picks from
	probeRatios = 9   // probes the median is taken over
	probeMin    = 5   // probes before any decision
	// probeBytes is the read of each file probed, at most: a probe of a
	// slow root is a request to the shared filesystem the job did not
	// ask for (1 MiB every 250 ms was 1.12-1.15x the bytes of a 42 MiB
	// file read once in TestPeersDeadBlockOwner).
	probeBytes = 64 << 10
	// probeSlow is how often a root judged clearly slow is probed: to see
	// it become fast (a dataset pulled into the page cache) no sooner is
	// needed.
	probeSlow = 5 * time.Second
	// maxProbeFiles bounds the tier's files made for the probes (a MiB
	// each at most).
	maxProbeFiles = 16
	// passBelow: a source within half again the tier's time is passed
	// through; the copy's own cost (its read and write, a reader's wait
	// or tee, the events) is more than that saves: a page-cached file of
	// a local disk read in 1.1-1.3x the time of a tmpfs tier's on this
	// host (4 KiB, a single read each). copyAbove: three times the
	// tier's time and the copies pay again (the emulated shared
	// filesystem's 2 ms open alone is hundreds of times a tier's read);
	// between the two nothing changes, so that noise does not flip it.
	passBelow = 1.5
	copyAbove = 3.0
	// clearlySlow: a first probe this far past the tier decides at once
	// that the root is worth copies.
	clearlySlow = 4 * copyAbove
)

// newSources measures the roots against tier (nil: no tier is written,
// and nothing is decided).
func newSources(l *Leader, tier *tiering.Tree) *sources {
	s := &sources{l: l, tier: tier, probes: map[int64]string{}, kick: make(chan struct{}, 1),
		read: func(p string, size int64) (time.Duration, error) { return tiering.ReadTime(p, size, 1) }}
	for _, r := range l.cfg.Roots {
		s.by = append(s.by, &source{root: strings.TrimSuffix(r, "/")})
	}
	if tier != nil {
		l.workers.Add(1)
		go s.prober()
	}
	return s
}

// whenJudged has f told when a root is first judged.
func (s *sources) whenJudged(f func(root string, pass bool)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decided = f
}

// of is the source of path, or nil.
//
// Preconditions: s.mu is held.
func (s *sources) of(path string) *source {
	for _, src := range s.by {
		if strings.HasPrefix(path, src.root+"/") {
			return src
		}
	}
	return nil
}

// undecided says whether path's root is not judged yet: the policies
// hold the copies of its files until it is (decided), and its first
// epoch is not copied for nothing.
func (s *sources) undecided(path string) bool {
	if s == nil || s.tier == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.of(path)
	return src != nil && !src.judged
}

// judgeWait bounds how long judge waits for a root's judgment.
const judgeWait = 2 * time.Second

// judge waits, judgeWait at most, until path's root is judged, and says
// whether it is passed through: the readers' tees of a first epoch are
// published only once their root is found worth copies.
func (s *sources) judge(path string) bool {
	for deadline := time.Now().Add(judgeWait); s.undecided(path) && time.Now().Before(deadline); {
		select {
		case <-s.l.stop:
			return s.passes(path)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s.passes(path)
}

// passes says whether path's root is passed through.
func (s *sources) passes(path string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.of(path)
	return src != nil && src.pass
}

// opened is told of a read-only open of path from its original.
func (s *sources) opened(path string) {
	if s == nil || s.tier == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.of(path)
	switch {
	case src == nil:
	case len(src.recent) == 0:
		src.recent = append(src.recent, path)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	case len(src.recent) < probeFiles:
		src.recent = append(src.recent, path)
	default:
		src.recent[src.next] = path
		src.next = (src.next + 1) % probeFiles
	}
}

// prober probes each source every probeEvery, every probeFirst until it
// has probeMin probes (a job's first epoch is not copied while nothing is
// decided), and every probeSlow while it is clearly slow.
func (s *sources) prober() {
	defer s.l.workers.Done()
	tick := time.NewTicker(probeFirst)
	defer tick.Stop()
	last := make([]time.Time, len(s.by))
	for {
		select {
		case <-s.l.stop:
			return
		case <-s.kick:
			for i := range s.by {
				if s.unprobed(i) {
					last[i] = time.Now()
					s.probe(i)
				}
			}
		case now := <-tick.C:
			for i := range s.by {
				s.mu.Lock()
				every := probeEvery
				switch src := s.by[i]; {
				case src.probes < probeMin:
					every = probeFirst
				case !src.pass && median(src.ratios) >= clearlySlow:
					every = probeSlow
				}
				s.mu.Unlock()
				if now.Sub(last[i]) >= every {
					last[i] = now
					s.probe(i)
				}
			}
		}
	}
}

// unprobed says whether root i has files to probe and no probe yet.
func (s *sources) unprobed(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[i].probes == 0 && len(s.by[i].recent) > 0
}

// probe reads the oldest of root i's recent files and the tier's like,
// and decides.
func (s *sources) probe(i int) {
	s.mu.Lock()
	src := s.by[i]
	if len(src.recent) == 0 {
		s.mu.Unlock()
		return
	}
	// The oldest once the ring is full; before, each in turn.
	path := src.recent[(src.next+src.probes)%len(src.recent)]
	if len(src.recent) == probeFiles {
		path = src.recent[src.next]
	}
	read := s.read
	s.mu.Unlock()
	var st unix.Stat_t
	if tiering.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 {
		return
	}
	n := min(st.Size, probeBytes)
	like, err := s.probeFile(n)
	if err != nil {
		return
	}
	// The tier's file once first, not counted: the first read after the
	// prober slept pays for cold processor caches (26 us against 13 for
	// 4 KiB; 8.9 against 7.8 in a loop), and the source's read must not.
	if _, err := read(like, n); err != nil {
		return
	}
	took, err := read(path, n)
	if err != nil {
		return
	}
	tier, err := read(like, n)
	if err != nil || tier <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src.src, src.tier, src.size = took, tier, n
	src.probes++
	src.ratios = append(src.ratios, float64(took)/float64(tier))
	if len(src.ratios) > probeRatios {
		src.ratios = src.ratios[1:]
	}
	s.decide(src)
	s.publish()
}

// probeFile is the tier's file of size bytes made for the probes.
func (s *sources) probeFile(size int64) (string, error) {
	s.mu.Lock()
	p, ok := s.probes[size]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := s.tier.ProbeFile(size)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.probes) >= maxProbeFiles {
		for k, old := range s.probes { // one out for the new: their sizes are the files' the job reads
			s.tier.RemoveProbe(old)
			delete(s.probes, k)
			break
		}
	}
	s.probes[size] = p
	return p, nil
}

// close removes the tier's files made for the probes.
func (s *sources) close() {
	if s == nil || s.tier == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, p := range s.probes {
		s.tier.RemoveProbe(p)
		delete(s.probes, k)
	}
}

// decide passes src through, or copies it again, by its probes' median.
//
// Preconditions: s.mu is held.
func (s *sources) decide(src *source) {
	med := median(src.ratios)
	if len(src.ratios) < probeMin && med < clearlySlow {
		return
	}
	first := !src.judged
	src.judged = true
	if first && s.decided != nil {
		defer s.decided(src.root, med <= passBelow)
	}
	switch {
	case !src.pass && med <= passBelow:
		src.pass = true
		s.l.log.Info().Msgf("%s is passed through: a file of it is read in %.2fx the time of one in the tier (%s)",
			src.root, med, src.times())
	case src.pass && med >= copyAbove:
		src.pass = false
		s.l.log.Info().Msgf("%s is copied again: a file of it is read in %.2fx the time of one in the tier (%s)",
			src.root, med, src.times())
	default:
		return
	}
	s.holdWaits()
}

// times says src's last probe's times.
func (src *source) times() string {
	return fmt.Sprintf("%v against %v for %s", src.src.Round(time.Microsecond), src.tier.Round(time.Microsecond), FormatSize(src.size))
}

// holdWaits stops readers asking for copies and teeing while every root
// read is passed through, and lets them again when one is not.
//
// Preconditions: s.mu is held.
func (s *sources) holdWaits() {
	all := true
	for _, src := range s.by {
		all = all && (src.pass || len(src.recent) == 0)
	}
	ld := &s.l.seg.s.leader
	switch {
	case all && !s.held:
		s.saved.wait, s.saved.tee = u64(&ld.wait_max), u64(&ld.tee_max)
		setU64(&ld.wait_max, 0)
		setU64(&ld.tee_max, 0)
		s.held = true
	case !all && s.held:
		setU64(&ld.wait_max, s.saved.wait)
		setU64(&ld.tee_max, s.saved.tee)
		s.held = false
	}
}

// median is the median of xs.
func median(xs []float64) float64 {
	ys := slices.Sorted(slices.Values(xs))
	return ys[len(ys)/2]
}

// SourceStats is one root as augur stat shows it.
type SourceStats struct {
	Root     string  `json:"root"`
	Passed   bool    `json:"passed_through"`
	Ratio    float64 `json:"ratio_to_tier"` // the probes' median: a file's read time from the root over the tier's
	SourceUs float64 `json:"source_us"`     // the last probe's
	TierUs   float64 `json:"tier_us"`
	Size     int64   `json:"probe_bytes"`
	Probes   int     `json:"probes"`
}

// publish writes augur stat's rows of the sources.
//
// Preconditions: s.mu is held.
func (s *sources) publish() {
	var rows []SourceStats
	for _, src := range s.by {
		if src.probes == 0 {
			continue
		}
		rows = append(rows, SourceStats{Root: src.root, Passed: src.pass, Ratio: median(src.ratios),
			SourceUs: float64(src.src) / 1e3, TierUs: float64(src.tier) / 1e3, Size: src.size, Probes: src.probes})
	}
	s.l.seg.publishSources(rows)
}
