package shim

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// TierStats is one tier's line in augur stat.
type TierStats struct {
	Path       string `json:"path"`
	Capacity   uint64 `json:"capacity"`
	Used       uint64 `json:"used"`
	Files      uint64 `json:"files"`
	Hits       uint64 `json:"hits"`
	Bytes      uint64 `json:"bytes_read"`
	Blocks     uint64 `json:"blocks"`           // large files' blocks it holds
	BlockBytes uint64 `json:"block_bytes_read"` // bytes read from them
}

// Stats is a snapshot of a job's counters.
type Stats struct {
	Job           string        `json:"job"`
	Segment       string        `json:"segment"`
	LeaderPID     int           `json:"leader_pid"`
	LeaderAlive   bool          `json:"leader_alive"`
	Ready         bool          `json:"ready"`
	Policy        string        `json:"policy"`
	Processes     uint64        `json:"processes"`
	Opens         uint64        `json:"opens"`
	Misses        uint64        `json:"misses"`
	OriginalBytes uint64        `json:"original_bytes_read"`
	WriteOpens    uint64        `json:"write_opens"`
	Invalidated   uint64        `json:"invalidated"`
	Aliased       uint64        `json:"changed_by_another_name"`
	Trees         uint64        `json:"directories_changed"`
	StaleNow      uint64        `json:"stale_marks"`
	TierErrors    uint64        `json:"tier_errors"`
	Untrusted     uint64        `json:"untrusted_copies"`
	HeldOpens     uint64        `json:"opens_while_written"`
	CopiesHeld    uint64        `json:"copies_held"`
	Writers       uint64        `json:"writers"`
	WritersLost   uint64        `json:"writers_unregistered"`
	Revalidated   uint64        `json:"copies_compared_at_open"`
	RingDropped   uint64        `json:"ring_dropped"`
	Untracked     uint64        `json:"untracked"`
	StaleRemoved  uint64        `json:"stale_removed"`
	Copies        uint64        `json:"copies"`
	CopyBytes     uint64        `json:"copy_bytes"`
	CopyRate      float64       `json:"copy_bytes_per_second"`
	InFlight      uint64        `json:"copies_in_flight"`
	Waited        uint64        `json:"opens_waited_for_copy"`
	Requested     uint64        `json:"opens_asked_for_copy"`
	Teed          uint64        `json:"first_reads_teed"`           // first reads whose bytes became the copy
	Untee         uint64        `json:"first_reads_untee"`          // tees abandoned (a reader stopped short or out of order)
	TeePooled     uint64        `json:"tees_in_pool_files"`         // tees begun in a file the leader made ready
	ClientCache   string        `json:"pfs_client_cache,omitempty"` // reactive: "yes", "no", "" (not known yet)
	WaitMin       uint64        `json:"wait_min,omitempty"`         // reactive with a client cache: its read-ahead; first opens ask for copies of larger files only
	Migrated      uint64        `json:"descriptors_moved"`
	UptimeSeconds float64       `json:"leader_uptime_seconds"`
	Predicted     uint64        `json:"predicted_files"`
	Sized         uint64        `json:"sized_files"` // of them, stat'ed so far
	PredHits      uint64        `json:"prefetch_hits"`
	PredLate      uint64        `json:"prefetch_late"`
	PredMisses    uint64        `json:"prefetch_misses"`
	Unpredicted   uint64        `json:"unpredicted_opens"`
	Accuracy      float64       `json:"prediction_accuracy"`
	StagedFiles   uint64        `json:"staged_files"`
	StagedBytes   uint64        `json:"staged_bytes"`
	StageBudget   uint64        `json:"stage_budget"`
	FellBack      bool          `json:"fell_back_to_reactive"`
	Events        uint64        `json:"events"`
	Lost          uint64        `json:"events_lost"`
	PeerFilesIn   uint64        `json:"peer_files_in"`
	PeerBytesIn   uint64        `json:"peer_bytes_in"`
	PeerFilesOut  uint64        `json:"peer_files_out"`
	PeerBytesOut  uint64        `json:"peer_bytes_out"`
	PeerErrors    uint64        `json:"peer_errors"`
	Tiers         []TierStats   `json:"tiers"`
	Streams       []StreamStats `json:"streams,omitempty"`
	Peers         *PeerStats    `json:"peers,omitempty"`      // nil: a job of one node
	BigFiles      uint64        `json:"large_files"`          // tiered in blocks
	BigTeed       uint64        `json:"large_pages_read_in"`  // pages readers' reads of the originals made present
	BigMisses     uint64        `json:"large_reads_original"` // reads of large files that went to the original, in part or whole
	BigStreams    uint64        `json:"large_streams"`        // descriptors found reading in order
	BigAhead      uint64        `json:"large_blocks_ahead"`   // blocks copied ahead of them
	BigAheadBytes uint64        `json:"large_bytes_ahead"`
	BigFilled     uint64        `json:"large_blocks_filled"` // blocks copied to fill files read half (blockfill.go)
	BigFillBytes  uint64        `json:"large_bytes_filled"`
	BigPredicted  uint64        `json:"large_blocks_predicted"` // blocks copied ahead of the ranks' predicted samples (inside.go)
	BigPredBytes  uint64        `json:"large_bytes_predicted"`
	Uncached      []Uncached    `json:"not_cached,omitempty"` // the first files augur could not cache, and why
	Sources       []SourceStats `json:"sources,omitempty"`    // the roots measured against the fastest tier (sources.go)

	// Blocks of large files (ranges of them) from and to peers, in all
	// (Peers has them per peer); PeerFilesIn and the like count whole
	// files.
	PeerBlocksIn      uint64 `json:"peer_blocks_in"`
	PeerBlockBytesIn  uint64 `json:"peer_block_bytes_in"`
	PeerBlocksOut     uint64 `json:"peer_blocks_out"`
	PeerBlockBytesOut uint64 `json:"peer_block_bytes_out"`
}

// StreamStats is what the clairvoyant policy found one stream (a rank,
// or the processes of one spawned rank) to read in one dataset
// directory, or why it found nothing.
type StreamStats struct {
	Stream    string  `json:"stream"`            // "rank 3", or "process 1234" when no variable names the rank
	Dataset   string  `json:"dataset"`           // directory below the root; "" is the root
	Sampler   string  `json:"sampler,omitempty"` // "DistributedSampler", "configured"; "" while it follows none
	Shuffle   bool    `json:"shuffle"`
	Seed      int64   `json:"seed"`
	WorldSize int     `json:"world_size"`
	Rank      int     `json:"rank"`
	Epoch     int     `json:"epoch"`
	Accuracy  float64 `json:"accuracy"` // of its recent opens of this dataset, the share its cursor expected
	Opens     uint64  `json:"opens"`    // its opens its cursor expected
	Why       string  `json:"why,omitempty"`
	Samples   string  `json:"samples,omitempty"` // samples inside files: the layout learned (inside.go)
	// Opens of the dataset before the stream first followed a cursor
	// there, and after (those no cursor expected), and the seconds from
	// the stream's first open to that lock.
	BeforeLock  uint64  `json:"opens_before_lock"`
	AfterLock   uint64  `json:"unexpected_opens_after_lock"`
	LockSeconds float64 `json:"seconds_to_lock"`
}

// opens is the count of read-only opens of dataset files: the data plane
// counts each once, as a hit of a tier or a miss.
func opens(c *C.struct_augur_counters) uint64 {
	n := u64(&c.misses)
	for i := range c.hits {
		n += u64(&c.hits[i])
	}
	return n
}

// Stats reads the segment's counters.
func (s *Segment) Stats() Stats {
	c, l := &s.s.counters, &s.s.leader
	st := Stats{
		Job:           s.Job,
		Segment:       s.Path,
		LeaderPID:     int(l.pid),
		Ready:         l.ready != 0,
		Policy:        C.GoString(&l.policy[0]),
		Processes:     u64(&c.processes),
		Opens:         opens(c),
		Misses:        u64(&c.misses),
		OriginalBytes: u64(&c.bytes[MaxTiers]),
		WriteOpens:    u64(&c.write_opens),
		Invalidated:   u64(&c.invalidated),
		Aliased:       u64(&c.aliased),
		Trees:         u64(&c.trees),
		StaleNow:      u64(&s.s.writes.stale),
		TierErrors:    u64(&c.tier_errors),
		Untrusted:     u64(&c.untrusted),
		HeldOpens:     u64(&c.held_opens),
		CopiesHeld:    u64(&l.copies_held),
		Writers:       max(u64(&s.s.writes.active), u64(&s.s.writes.stale)) - u64(&s.s.writes.stale), // active counts stale marks too
		WritersLost:   u64(&s.s.writes.lost),
		Revalidated:   u64(&c.revalidated),
		RingDropped:   u64(&c.ring_dropped),
		Untracked:     u64(&c.untracked),
		StaleRemoved:  u64(&l.stale_removed),
		Copies:        u64(&l.copies),
		CopyBytes:     u64(&l.copy_bytes),
		InFlight:      u64(&l.inflight),
		Waited:        u64(&l.waited),
		Requested:     u64(&l.requested),
		Teed:          u64(&l.teed),
		Untee:         u64(&l.untee),
		TeePooled:     u64(&l.tee_pooled),
		ClientCache:   [...]string{"", "yes", "no"}[min(u64(&l.client_cache), 2)],
		WaitMin:       u64(&l.wait_min),
		Migrated:      u64(&c.migrated),
		Predicted:     u64(&l.predicted),
		Sized:         u64(&l.sized),
		PredHits:      u64(&l.pred_hits),
		PredLate:      u64(&l.pred_late),
		PredMisses:    u64(&l.pred_misses),
		Unpredicted:   u64(&l.unpredicted),
		Accuracy:      float64(u64(&l.accuracy_ppm)) / 1e6,
		StagedFiles:   u64(&l.staged_files),
		StagedBytes:   u64(&l.staged_bytes),
		StageBudget:   u64(&l.stage_budget),
		FellBack:      u64(&l.fell_back) != 0,
		Events:        u64(&l.events),
		Lost:          u64(&l.lost),
		PeerFilesIn:   u64(&l.peer_files_in),
		PeerBytesIn:   u64(&l.peer_bytes_in),
		PeerFilesOut:  u64(&l.peer_files_out),
		PeerBytesOut:  u64(&l.peer_bytes_out),
		PeerErrors:    u64(&l.peer_errors),
	}
	st.LeaderAlive = st.LeaderPID > 0 && u64(&l.ended_ns) == 0 && syscall.Kill(st.LeaderPID, 0) == nil
	if started := u64(&l.started_ns); started > 0 {
		end := time.Now()
		if ended := u64(&l.ended_ns); ended > 0 {
			end = time.Unix(0, int64(ended))
		}
		st.UptimeSeconds = end.Sub(time.Unix(0, int64(started))).Seconds()
		if st.UptimeSeconds > 0 {
			st.CopyRate = float64(st.CopyBytes) / st.UptimeSeconds
		}
	}
	st.Streams = s.streams()
	readJSON(&l.uncached_gen, &l.uncached_len, l.uncached[:], &st.Uncached)
	readJSON(&l.sources_gen, &l.sources_len, l.sources[:], &st.Sources)
	st.BigFiles, st.BigTeed, st.BigMisses = u64(&l.big_files), u64(&c.block_teed), u64(&c.block_misses)
	st.BigStreams, st.BigAhead, st.BigAheadBytes = u64(&l.big_streams), u64(&l.big_ahead), u64(&l.big_ahead_bytes)
	st.BigFilled, st.BigFillBytes = u64(&l.big_filled), u64(&l.big_filled_bytes)
	st.BigPredicted, st.BigPredBytes = u64(&l.big_predicted), u64(&l.big_predicted_bytes)
	var ps PeerStats
	if readJSON(&l.peers_gen, &l.peers_len, l.peers[:], &ps) {
		st.Peers = &ps
		st.PeerBlocksIn, st.PeerBlockBytesIn = uint64(ps.BlocksIn), uint64(ps.BlockBytesIn)
		st.PeerBlocksOut, st.PeerBlockBytesOut = uint64(ps.BlocksOut), uint64(ps.BlockBytesOut)
	}
	for i := 0; i < MaxTiers; i++ {
		path := C.GoString(&l.tiers[i][0])
		if path == "" {
			break
		}
		st.Tiers = append(st.Tiers, TierStats{
			Path:       path,
			Capacity:   u64(&l.tier_capacity[i]),
			Used:       u64(&l.tier_used[i]),
			Files:      u64(&l.tier_files[i]),
			Hits:       u64(&c.hits[i]),
			Bytes:      u64(&c.bytes[i]),
			Blocks:     u64(&l.big_blocks[i]),
			BlockBytes: u64(&c.block_bytes[i]),
		})
	}
	return st
}

// publishStreams writes the stream table; a table too large for the
// segment is cut to the streams that fit.
func (s *Segment) publishStreams(rows []StreamStats) {
	l := &s.s.leader
	for {
		b, _ := json.Marshal(rows)
		if publishJSON(&l.streams_gen, &l.streams_len, l.streams[:], b) || len(rows) == 0 {
			return
		}
		rows = rows[:len(rows)/2]
	}
}

// publishSources writes the sources' rows (sources.go), as many as fit.
func (s *Segment) publishSources(rows []SourceStats) {
	l := &s.s.leader
	for {
		b, _ := json.Marshal(rows)
		if publishJSON(&l.sources_gen, &l.sources_len, l.sources[:], b) || len(rows) == 0 {
			return
		}
		rows = rows[:len(rows)-1]
	}
}

// streams reads the stream table.
func (s *Segment) streams() []StreamStats {
	l := &s.s.leader
	var rows []StreamStats
	if !readJSON(&l.streams_gen, &l.streams_len, l.streams[:], &rows) {
		return nil
	}
	return rows
}

// publishJSON writes b, JSON, into words under the sequence lock gen
// (odd while it is being written), its length in n. It reports false,
// writing nothing, when b does not fit.
func publishJSON(gen, n *C.uint64_t, cw []C.uint64_t, b []byte) bool {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&cw[0])), len(cw))
	if len(b) > 8*len(words) {
		return false
	}
	b = append(b, make([]byte, 7)...)
	g := u64(gen)
	setU64(gen, g|1)
	for i := 0; i+8 <= len(b); i += 8 {
		atomic.StoreUint64(&words[i/8], binary.LittleEndian.Uint64(b[i:]))
	}
	setU64(n, uint64(len(b)-7))
	setU64(gen, (g|1)+1)
	return true
}

// readJSON reads what publishJSON wrote into v, retrying while the
// leader writes it; it reports whether it found a value.
func readJSON(gen, n *C.uint64_t, cw []C.uint64_t, v any) bool {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&cw[0])), len(cw))
	for try := 0; try < 100; try++ {
		g := u64(gen)
		if g&1 != 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		size := min(int(u64(n)), 8*len(words))
		b := make([]byte, 0, size+8)
		for i := 0; i < size; i += 8 {
			b = binary.LittleEndian.AppendUint64(b, atomic.LoadUint64(&words[i/8]))
		}
		if u64(gen) != g {
			continue
		}
		return size > 0 && json.Unmarshal(b[:size], v) == nil
	}
	return false
}

// setString copies s into a fixed C char array, NUL-terminated.
func setString(dst *C.char, n int, s string) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), n)
	m := copy(b[:n-1], s)
	b[m] = 0
}
