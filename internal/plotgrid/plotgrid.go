// Package plotgrid draws a grid of gonum plots into one PNG file, as
// make bench's plot (bench/compare) and augur sim's (sim) both do.
package plotgrid

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Write draws grid (rows of plots of equal length, nil for an empty
// cell), each cell w by h, aligned with the padding of pad, into the
// PNG file name.
func Write(name string, grid [][]*plot.Plot, w, h vg.Length, pad draw.Tiles) error {
	rows, cols := len(grid), 0
	if rows > 0 {
		cols = len(grid[0])
	}
	img := vgimg.New(w*vg.Length(cols), h*vg.Length(rows))
	pad.Rows, pad.Cols = rows, cols
	canvases := plot.Align(grid, pad, draw.New(img))
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
