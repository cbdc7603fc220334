package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"strings"

	"github.com/augur-hpc/augur/internal/plotgrid"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func find(runs []*run, name string) *run {
	for _, r := range runs {
		if r.Config == name && r.Result != nil && r.Error == "" {
			return r
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// tierHits sums the tier hits augur stat reported.
func tierHits(r *run) string {
	if len(r.AugurStat) == 0 {
		return "-"
	}
	var st struct {
		Opens  int64 `json:"opens"`
		Misses int64 `json:"misses"`
		Tiers  []struct {
			Hits int64 `json:"hits"`
		} `json:"tiers"`
	}
	if json.Unmarshal(r.AugurStat, &st) != nil {
		return "-"
	}
	var parts []string
	for _, t := range st.Tiers {
		parts = append(parts, fmt.Sprint(t.Hits))
	}
	return strings.Join(parts, "/") + fmt.Sprintf(" m%d", st.Misses)
}

// printScenario prints one scenario's table: per-epoch times, the
// totals, ratios against local and pfs, stall and PFS operations.
func printScenario(w io.Writer, sr *scenarioResult) {
	mode := "the PFS client with a page cache, dropped before every epoch"
	if sr.DirectIO {
		mode = "the PFS client with direct I/O (no page cache)"
	}
	fmt.Fprintf(w, "\n%s: %s — %s; tiers RAM %s + disk %s; %s\n", sr.Name, sr.About, sr.Dataset,
		fmtMiB(sr.RAMTier), fmtMiB(sr.DiskTier), mode)
	fmt.Fprintf(w, "| config | epoch 1 | epoch 2 | epoch 3 | warm | total | x local | pfs / this | stall | p99 read | PFS opens | PFS MB by epoch | tier hits |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	local, pfs := find(sr.Runs, "local"), find(sr.Runs, "pfs")
	for _, r := range sr.Runs {
		if r.Skipped != "" {
			fmt.Fprintf(w, "| %s | %s |\n", r.Config, r.Skipped)
			continue
		}
		if r.Result == nil || r.Error != "" {
			fmt.Fprintf(w, "| %s | failed: %s |\n", r.Config, firstLine(r.Error))
			continue
		}
		row := []string{r.Config}
		var stall, p99 float64
		var opens int64
		var bytes []string
		for i := 0; i < 3; i++ {
			if i < len(r.Result.Epochs) {
				ep := r.Result.Epochs[i]
				row = append(row, fmt.Sprintf("%.2f", ep.Seconds))
				stall += ep.Stall
				if ep.Latency != nil && ep.Latency.P99 > p99 {
					p99 = ep.Latency.P99
				}
				if ep.PFS != nil {
					opens += ep.PFS.Opens
					bytes = append(bytes, fmt.Sprintf("%.0f", float64(ep.PFS.ReadBytes)/1e6))
				}
			} else {
				row = append(row, "-")
			}
		}
		warm := "-"
		if r.WarmSecs > 0 {
			warm = fmt.Sprintf("%.2f", r.WarmSecs)
			if r.WarmPFS != nil {
				opens += r.WarmPFS.Opens
				bytes = append([]string{fmt.Sprintf("warm %.0f", float64(r.WarmPFS.ReadBytes)/1e6)}, bytes...)
			}
		}
		lat := "-"
		if p99 > 0 {
			lat = fmt.Sprintf("%.1f ms", p99/1e3)
		}
		row = append(row, warm, fmt.Sprintf("%.2f", r.total()))
		if local != nil {
			row = append(row, ratio(r.total(), local.total()))
		} else {
			row = append(row, "-")
		}
		if pfs != nil {
			row = append(row, ratio(pfs.total(), r.total()))
		} else {
			row = append(row, "-")
		}
		pfsOps, pfsMB := "-", "-"
		if r.Config != "local" && r.Config != "noio" {
			pfsOps, pfsMB = fmt.Sprint(opens), strings.Join(bytes, " · ")
		}
		row = append(row, fmt.Sprintf("%.2f", stall), lat, pfsOps, pfsMB, tierHits(r))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	printBound(w, sr)
	printStalls(w, sr)
	printFirstEpochs(w, sr)
}

// printFirstEpochs prints epoch 1 alone of pfs and augur-reactive, the
// medians of their interleaved rounds.
func printFirstEpochs(w io.Writer, sr *scenarioResult) {
	p, r := sr.FirstEpochs["pfs"], sr.FirstEpochs["augur-reactive"]
	if len(p) == 0 || len(r) == 0 {
		return
	}
	pb, rb := sr.FirstEpochsBytes["pfs"], sr.FirstEpochsBytes["augur-reactive"]
	fmt.Fprintf(w, "epoch 1 alone, medians of %d interleaved rounds: pfs %.3fs, augur-reactive %.3fs: %.3fx; PFS bytes %.2fx\n",
		len(p), median(p), median(r), median(r)/median(p), median(rb)/median(pb))
}

// printBound prints each configuration's first epoch against the lower
// bound of a cold start, the larger of the compute time (noio's epoch)
// and the dataset's bytes at the bandwidth the PFS really delivers.
func printBound(w io.Writer, sr *scenarioResult) {
	noio := find(sr.Runs, "noio")
	if noio == nil || noio.Result == nil || len(noio.Result.Epochs) == 0 || sr.PFSRate <= 0 {
		return
	}
	var bytes int64
	if pfs := find(sr.Runs, "pfs"); pfs != nil && pfs.Result != nil && len(pfs.Result.Epochs) > 0 {
		bytes = pfs.Result.Epochs[0].Bytes
	}
	bound := max(noio.Result.Epochs[0].Seconds, float64(bytes)/sr.PFSRate)
	fmt.Fprintf(w, "epoch 1 against its bound max(compute %.2fs, bytes / %.0f MB/s delivered = %.2fs) = %.2fs:",
		noio.Result.Epochs[0].Seconds, sr.PFSRate/1e6, float64(bytes)/sr.PFSRate, bound)
	for _, r := range sr.Runs {
		if r.Config == "noio" || r.Config == "local" || r.Result == nil || len(r.Result.Epochs) == 0 {
			continue
		}
		fmt.Fprintf(w, " %s %.2fx", r.Config, r.Result.Epochs[0].Seconds/bound)
	}
	fmt.Fprintln(w)
}

// printStalls prints the first epoch's stall of the policies, and again
// after the job's start-up, and how much lower clairvoyant's is than
// reactive's. (The C reader reads at once; a Python script imports its
// libraries first.)
func printStalls(w io.Writer, sr *scenarioResult) {
	line := func(what string, runs []*run) {
		var parts []string
		for _, r := range runs {
			if !strings.HasPrefix(r.Config, "augur-") || r.Config == "augur-warm" || r.Result == nil ||
				r.Error != "" || len(r.Result.Epochs) == 0 {
				continue
			}
			ep := r.Result.Epochs[0]
			parts = append(parts, fmt.Sprintf("%s %.2fs (stall %.3fs)", r.Config, ep.Seconds, ep.Stall))
		}
		if len(parts) == 0 {
			return
		}
		fmt.Fprintf(w, "epoch 1%s: %s", what, strings.Join(parts, ", "))
		re, cl := find(runs, "augur-reactive"), find(runs, "augur-clairvoyant")
		if re != nil && cl != nil && len(re.Result.Epochs) > 0 && len(cl.Result.Epochs) > 0 {
			r := ratio(re.Result.Epochs[0].Stall, cl.Result.Epochs[0].Stall)
			if re.Result.Epochs[0].Stall > 100*cl.Result.Epochs[0].Stall {
				r = "> 100" // a stall of a millisecond or less: the quotient is noise
			}
			fmt.Fprintf(w, "; stall reactive / clairvoyant %s", r)
		}
		fmt.Fprintln(w)
	}
	line("", sr.Runs)
	for _, r := range sr.WithStartup {
		if r.Result != nil {
			line(fmt.Sprintf(", after a start-up of %v", r.Result.Workload.Startup), sr.WithStartup)
			break
		}
	}
}

// printSummary prints, per scenario of S1-S3, each configuration's total
// time as a multiple of local's and as a speed-up over pfs; nothing when
// none ran.
func printSummary(w io.Writer, rep *report) {
	if len(rep.Scenarios) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsummary (ratios of total time: epochs + warm-up + start-up)\n")
	fmt.Fprintf(w, "| scenario | config | total (s) | x local | pfs / this |\n|---|---|---|---|---|\n")
	for _, sr := range rep.Scenarios {
		local, pfs := find(sr.Runs, "local"), find(sr.Runs, "pfs")
		for _, r := range sr.Runs {
			if r.Result == nil || r.Error != "" {
				continue
			}
			lr, pr := "-", "-"
			if local != nil {
				lr = ratio(r.total(), local.total())
			}
			if pfs != nil {
				pr = ratio(pfs.total(), r.total())
			}
			fmt.Fprintf(w, "| %s | %s | %.2f | %s | %s |\n", sr.Name, r.Config, r.total(), lr, pr)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// plotEpochs draws per-epoch time by configuration, one panel per
// scenario (and one for PyTorch), into a PNG.
func plotEpochs(name string, rep *report) error {
	type panel struct {
		title string
		runs  []*run
	}
	var panels []panel
	for _, sr := range rep.Scenarios {
		panels = append(panels, panel{fmt.Sprintf("%s: %s", sr.Name, sr.About), sr.Runs})
	}
	for _, lr := range rep.Large {
		if len(lr.Rounds) > 0 {
			panels = append(panels, panel{fmt.Sprintf("%s, %s tier (last round)", lr.Name, fmtMiB(lr.Tier)), lr.Rounds[len(lr.Rounds)-1]})
		}
	}
	if rep.PyTorch != nil {
		panels = append(panels, panel{"PyTorch DataLoader, JPEG + PIL", rep.PyTorch.Runs})
	}
	if len(panels) == 0 {
		return nil
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for k, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "epoch"
		p.Y.Label.Text = "epoch time (s)"
		p.Y.Min = 0
		top := 0.0
		for _, r := range pn.runs {
			if r.Result == nil || r.Error != "" {
				continue
			}
			i := configIndex(r.Config) // the same colour in every panel
			pts := make(plotter.XYs, len(r.Result.Epochs))
			for k, ep := range r.Result.Epochs {
				pts[k].X, pts[k].Y = float64(ep.Epoch), ep.Seconds
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			s.Color = plotutil.Color(i)
			s.Shape = plotutil.Shape(i)
			p.Add(l, s)
			p.Legend.Add(r.Config, l, s)
			for _, pt := range pts {
				top = max(top, pt.Y)
			}
		}
		p.Legend.Top = true
		p.Y.Max = top * 1.6 // room for the legend above the lines
		p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
			var t []plot.Tick
			for v := 1.0; v <= max+0.01; v++ {
				t = append(t, plot.Tick{Value: v, Label: fmt.Sprint(v)})
			}
			return t
		})
		p.Add(plotter.NewGrid())
		p.BackgroundColor = color.White
		plots[k/cols][k%cols] = p
	}
	tiles := draw.Tiles{PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return plotgrid.Write(name, plots, 6*vg.Inch, 4*vg.Inch, tiles)
}

// configIndex is the position of a configuration in the table, so that
// it has one colour and shape in every panel.
func configIndex(name string) int {
	for i, c := range configs {
		if c.name == name {
			return i
		}
	}
	return len(configs)
}
