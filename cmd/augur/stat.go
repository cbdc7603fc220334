package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/augur-hpc/augur/shim"
)

func cmdStat(args []string) int {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	watch := fs.Bool("watch", false, "refresh every second until interrupted")
	job := fs.String("job", "", "job id (default: the most recent job)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := ""
	if *job != "" {
		path = shim.SegmentPath(*job)
	} else {
		jobs := shim.Jobs()
		if len(jobs) == 0 {
			return fail("stat: %v", shim.ErrNoSegment)
		}
		path = shim.SegmentPath(jobs[0])
	}
	seg, err := shim.OpenSegment(path)
	if errors.Is(err, os.ErrNotExist) {
		return fail("stat: no job %q on this node (no %s)", *job, path)
	}
	if err != nil {
		return fail("stat: %v", err)
	}
	for {
		st := seg.Stats()
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.Encode(st)
		} else {
			if *watch {
				fmt.Print("\033[H\033[2J")
			}
			printStats(os.Stdout, st)
		}
		if !*watch {
			return 0
		}
		time.Sleep(time.Second)
	}
}

func printStats(w io.Writer, st shim.Stats) {
	leader := "none"
	if st.LeaderPID > 0 {
		leader = fmt.Sprintf("pid %d", st.LeaderPID)
		if !st.LeaderAlive {
			leader += " (ended)"
		}
	}
	fmt.Fprintf(w, "job %s   policy %s   leader %s   processes %d\n", st.Job, st.Policy, leader, st.Processes)
	hitRate := 0.0
	if st.Opens > 0 {
		hitRate = 100 * float64(st.Opens-st.Misses) / float64(st.Opens)
	}
	fmt.Fprintf(w, "dataset opens %d   from tiers %.1f%%   from the original %d (%s read)\n",
		st.Opens, hitRate, st.Misses, shim.FormatSize(int64(st.OriginalBytes)))
	fmt.Fprintf(w, "\n%-36s %12s %12s %10s %10s %12s\n", "tier", "used", "capacity", "files", "hits", "read")
	for _, t := range st.Tiers {
		fmt.Fprintf(w, "%-36s %12s %12s %10d %10d %12s\n", t.Path, shim.FormatSize(int64(t.Used)),
			shim.FormatSize(int64(t.Capacity)), t.Files, t.Hits, shim.FormatSize(int64(t.Bytes)))
		if t.Capacity > 0 {
			frac := float64(t.Used) / float64(t.Capacity)
			n := int(frac*40 + 0.5)
			n = min(max(n, 0), 40)
			fmt.Fprintf(w, "  [%s%s] %.0f%%\n", strings.Repeat("#", n), strings.Repeat(".", 40-n), 100*frac)
		}
	}
	fmt.Fprintf(w, "\ncopies made %d (%s, %s/s)   in flight %d   opens that waited for one %d   asked for one %d   first reads that made it %d (abandoned %d, begun in the leader's pool of files %d)   descriptors moved to a copy %d\n",
		st.Copies, shim.FormatSize(int64(st.CopyBytes)), shim.FormatSize(int64(st.CopyRate)), st.InFlight, st.Waited, st.Requested, st.Teed, st.Untee, st.TeePooled, st.Migrated)
	client := map[string]string{"yes": "keeps a page cache", "no": "keeps no page cache"}[st.ClientCache]
	switch {
	case client != "" && st.WaitMin > 0:
		fmt.Fprintf(w, "the shared filesystem's client %s, with a read-ahead of %s: a first open of a file within it reads the original and the copy is made from the pages it left; a larger file's first open waits for its copy, read in parallel parts\n", client, shim.FormatSize(int64(st.WaitMin)))
	case st.ClientCache == "yes":
		fmt.Fprintf(w, "the shared filesystem's client keeps a page cache: first opens read the original and each copy is made from the pages they left\n")
	case st.ClientCache == "no":
		fmt.Fprintf(w, "the shared filesystem's client keeps no page cache: first opens read the original and their reads make the copy (or, on several nodes, wait for the copy of a file their node owns)\n")
	}
	switch {
	case st.Policy == "clairvoyant" && st.Predicted == 0 && st.FellBack:
		fmt.Fprintf(w, "prediction: none (the leader's log says why); the reactive policy runs instead\n")
	case st.Policy == "clairvoyant" && st.Predicted == 0:
		fmt.Fprintf(w, "prediction: planning (listing the dataset); copies already in the tiers are served meanwhile\n")
	case st.Predicted > 0:
		sized := ""
		if st.Sized < st.Predicted {
			sized = fmt.Sprintf(" (%d stat'ed so far)", st.Sized)
		}
		fmt.Fprintf(w, "prediction: %d files%s, accuracy %.1f%%; prefetched in time %d, late %d, missed %d, unpredicted %d; staged %d (%s of %s)\n",
			st.Predicted, sized, 100*st.Accuracy, st.PredHits, st.PredLate, st.PredMisses, st.Unpredicted,
			st.StagedFiles, shim.FormatSize(int64(st.StagedBytes)), shim.FormatSize(int64(st.StageBudget)))
		printStreams(w, st.Streams)
	}
	printPeers(w, st)
	if st.BigFiles > 0 {
		var blocks, bytes uint64
		for _, t := range st.Tiers {
			blocks, bytes = blocks+t.Blocks, bytes+t.BlockBytes
		}
		fmt.Fprintf(w, "large files %d in blocks: %d blocks held, %s read from them; pages made present by readers %d; reads from the originals %d\n",
			st.BigFiles, blocks, shim.FormatSize(int64(bytes)), st.BigTeed, st.BigMisses)
		fmt.Fprintf(w, "  read in order: %d descriptors, %d blocks (%s) copied ahead of them\n",
			st.BigStreams, st.BigAhead, shim.FormatSize(int64(st.BigAheadBytes)))
		fmt.Fprintf(w, "  read half: %d blocks (%s) copied to fill their files\n", st.BigFilled, shim.FormatSize(int64(st.BigFillBytes)))
		fmt.Fprintf(w, "  predicted: %d blocks (%s) copied ahead of the ranks' samples\n", st.BigPredicted, shim.FormatSize(int64(st.BigPredBytes)))
	}
	for _, s := range st.Sources {
		what := "copied"
		if s.Passed {
			what = "passed through, no copies"
		}
		fmt.Fprintf(w, "source %s: %s: a file read in %.2fx the fastest tier's time (%.0f us against %.0f us for %s; %d probes)\n",
			s.Root, what, s.Ratio, s.SourceUs, s.TierUs, shim.FormatSize(s.Size), s.Probes)
	}
	for _, u := range st.Uncached {
		fmt.Fprintf(w, "not cached: %s: %s\n", u.Path, u.Why)
	}
	fmt.Fprintf(w, "write opens %d   writers now %d   opens of files being written %d   copies not made for them %d\n",
		st.WriteOpens, st.Writers, st.HeldOpens, st.CopiesHeld)
	fmt.Fprintf(w, "copies invalidated %d   compared with their source at open %d\n", st.Invalidated, st.Revalidated)
	fmt.Fprintf(w, "files changed through another name %d (stale now %d)   directories renamed or removed %d\n",
		st.Aliased, st.StaleNow, st.Trees)
	fmt.Fprintf(w, "stale removed at start %d   tier errors %d   copies refused (not yours) %d\n",
		st.StaleRemoved, st.TierErrors, st.Untrusted)
	fmt.Fprintf(w, "events %d   dropped (ring full) %d   lost %d   untracked fds %d\n",
		st.Events, st.RingDropped, st.Lost, st.Untracked)
}

// printPeers prints what went between this node and the job's others,
// and the performance model that chose between them and the shared
// filesystem.
func printPeers(w io.Writer, st shim.Stats) {
	p := st.Peers
	if p == nil {
		return
	}
	fmt.Fprintf(w, "peers: node %d of %d on %s   from peers %d files (%s)   to peers %d files (%s; %d on demand)   errors %d\n",
		p.Node, p.Nodes, p.Addr, st.PeerFilesIn, shim.FormatSize(int64(st.PeerBytesIn)),
		st.PeerFilesOut, shim.FormatSize(int64(st.PeerBytesOut)), p.Fetched, st.PeerErrors)
	if st.PeerBlocksIn+st.PeerBlocksOut > 0 || st.BigFiles > 0 {
		fmt.Fprintf(w, "  large files' blocks: from peers %d (%s)   to peers %d (%s; %d copied for them)\n",
			st.PeerBlocksIn, shim.FormatSize(int64(st.PeerBlockBytesIn)), st.PeerBlocksOut,
			shim.FormatSize(int64(st.PeerBlockBytesOut)), p.FetchedBlocks)
	}
	for _, l := range p.Peers {
		state := "up"
		if l.Down {
			state = fmt.Sprintf("down (backoff %v)", l.Backoff)
		}
		fmt.Fprintf(w, "  node %-4d %-22s in %d (%s)   out %d (%s)   blocks in %d (%s) out %d (%s)   not held %d   errors %d (forged answers %d)   %s\n",
			l.Node, l.Addr, l.FilesIn, shim.FormatSize(l.BytesIn), l.FilesOut, shim.FormatSize(l.BytesOut),
			l.BlocksIn, shim.FormatSize(l.BlockBytesIn), l.BlocksOut, shim.FormatSize(l.BlockBytesOut),
			l.Misses, l.Errors, l.Forged, state)
	}
	for _, m := range p.Model {
		fmt.Fprintf(w, "  model %-8s %s/s (prior %s/s, %d samples, time x%g)   queued %s in %d\n", m.Source,
			shim.FormatSize(int64(m.Rate)), shim.FormatSize(int64(m.Prior)), m.Samples, m.Weight, shim.FormatSize(m.Queued), m.InFlight)
	}
	if len(p.NotServed) > 0 {
		fmt.Fprintf(w, "  requests not served: %v\n", p.NotServed)
	}
}

// printStreams prints what each stream was found to read, or why not.
func printStreams(w io.Writer, rows []shim.StreamStats) {
	for _, r := range rows {
		dir := r.Dataset
		if dir == "" {
			dir = "."
		}
		switch {
		case r.Samples != "" && r.Sampler == "":
			fmt.Fprintf(w, "  %-14s %s: %s (%s)\n", r.Stream, dir, r.Why, r.Samples)
		case r.Samples != "":
			fmt.Fprintf(w, "  %-14s %s: samples inside files, %s; DistributedSampler seed %d, world size %d, rank %d, epoch %d, %d reads\n",
				r.Stream, dir, r.Samples, r.Seed, r.WorldSize, r.Rank, r.Epoch, r.Opens)
		case r.Sampler == "":
			fmt.Fprintf(w, "  %-14s %s\n", r.Stream, r.Why)
		case r.Sampler == "configured":
			fmt.Fprintf(w, "  %-14s %s: the configured sampler, rank %d, epoch %d, accuracy %.1f%%, %d opens\n",
				r.Stream, dir, r.Rank, r.Epoch, 100*r.Accuracy, r.Opens)
		default:
			order := "in order"
			if r.Shuffle {
				order = fmt.Sprintf("seed %d", r.Seed)
			}
			fmt.Fprintf(w, "  %-14s %s: %s %s, world size %d, rank %d, epoch %d, accuracy %.1f%%, %d opens\n",
				r.Stream, dir, r.Sampler, order, r.WorldSize, r.Rank, r.Epoch, 100*r.Accuracy, r.Opens)
		}
	}
}
