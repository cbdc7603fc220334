package sim

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable writes r as a table like make bench's: one row per policy,
// the epochs' times (the first three and the mean of the rest when
// there are more), total, ratios to perfect and to pfs, stall, and bytes
// by source over the run.
func WriteTable(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%d nodes x %d ranks; %d files, %.1f GB; staging budget %.2f GB per node; simulated in %.1fs\n",
		r.Nodes, r.RanksPerNode, r.Files, float64(r.Bytes)/1e9, float64(r.Stage)/1e9, r.Seconds)
	if len(r.Policies) == 0 {
		return
	}
	n := len(r.Policies[0].Epochs)
	shown := min(n, 3)
	head := []string{"policy"}
	for e := range shown {
		head = append(head, fmt.Sprintf("epoch %d", e+1))
	}
	if n > shown {
		head = append(head, fmt.Sprintf("mean %d-%d", shown+1, n))
	}
	head = append(head, "total (s)", "x perfect", "pfs / this", "stall (s)", "PFS x dataset", "peer x dataset", "tier GB")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	perfect, pfs := r.Policy("perfect"), r.Policy("pfs")
	for _, p := range r.Policies {
		row := []string{p.Policy}
		for e := range shown {
			row = append(row, secs(p.Epochs[e].Seconds))
		}
		if n > shown {
			var s float64
			for _, e := range p.Epochs[shown:] {
				s += e.Seconds
			}
			row = append(row, secs(s/float64(n-shown)))
		}
		var pfsB, peerB, tierB int64
		for _, e := range p.Epochs {
			pfsB += e.PFSBytes
			peerB += e.PeerBytes
			for _, b := range e.TierBytes {
				tierB += b
			}
		}
		row = append(row, secs(p.Total()), ratio(p.Total(), perfect), ratio2(pfs, p.Total()), secs(p.Stall()),
			fmt.Sprintf("%.2f", float64(pfsB)/float64(r.Bytes)), fmt.Sprintf("%.2f", float64(peerB)/float64(r.Bytes)),
			fmt.Sprintf("%.1f", float64(tierB)/1e9))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

func secs(s float64) string {
	if s >= 100 {
		return fmt.Sprintf("%.0f", s)
	}
	return fmt.Sprintf("%.2f", s)
}

func ratio(t float64, base *PolicyResult) string {
	if base == nil || base.Total() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", t/base.Total())
}

func ratio2(base *PolicyResult, t float64) string {
	if base == nil || t == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", base.Total()/t)
}
