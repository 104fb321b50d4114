package bench

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

type canvas interface {
	vg.CanvasSizer
}

func vgimgCanvas(ext string, w, h vg.Length) canvas {
	if ext == "svg" {
		return vgsvg.New(w, h)
	}
	return vgimg.New(w, h)
}

func drawTiles(c canvas, ps []*plot.Plot) {
	dc := draw.New(c)
	t := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := [][]*plot.Plot{ps}
	canvases := plot.Align(grid, t, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
}

func saveCanvas(c canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	switch v := c.(type) {
	case *vgsvg.Canvas:
		_, err = v.WriteTo(f)
	case *vgimg.Canvas:
		_, err = vgimg.PngCanvas{Canvas: v}.WriteTo(f)
	}
	if err != nil {
		return err
	}
	return f.Close()
}
