package sim

import (
	"image/color"

	"github.com/augur-hpc/augur/internal/plotgrid"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Panel is one scenario's result in a plot.
type Panel struct {
	Title  string
	Result *Result
}

// Plot draws, per panel, a bar per policy of its total time stacked as
// time the ranks computed (or waited for each other) under the time they
// stalled for data, two panels a row, into a PNG.
func Plot(name string, panels []Panel) error {
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for k, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.Title
		p.Y.Label.Text = "time (s)"
		var busy, stall plotter.Values
		var names []string
		top := 0.0
		for _, pr := range pn.Result.Policies {
			total, st := pr.Total(), pr.Stall()
			busy = append(busy, total-st)
			stall = append(stall, st)
			names = append(names, pr.Policy)
			top = max(top, total)
		}
		w := vg.Points(14)
		b, err := plotter.NewBarChart(busy, w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(2)
		s, err := plotter.NewBarChart(stall, w)
		if err != nil {
			return err
		}
		s.Color = color.RGBA{R: 220, G: 60, B: 40, A: 255}
		s.StackOn(b)
		p.Add(b, s)
		p.Legend.Add("compute and barrier", b)
		p.Legend.Add("stall (waiting for data)", s)
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, top*1.25 // room above the bars for the legend
		p.NominalX(names...)
		p.X.Tick.Label.Rotation = 0.6
		p.X.Tick.Label.XAlign = draw.XRight
		p.Add(plotter.NewGrid())
		grid[k/cols][k%cols] = p
	}
	tiles := draw.Tiles{PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	return plotgrid.Write(name, grid, vg.Points(420), vg.Points(300), tiles)
}
