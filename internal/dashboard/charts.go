package dashboard

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/usagefmt"
)

// maxPoints bounds a chart's points: a run of 10,000 iterations is drawn
// from buckets (each keeping its highest value), so the SVG stays small.
const maxPoints = 400

// charts are the run page's two charts, as inline SVG rendered here: no
// chart library, no script, and they print and scale like the text.
type charts struct {
	Cost    template.HTML // cumulative cost over iterations
	Failing template.HTML // failing tests per iteration
	HasCost bool
	HasTest bool
}

type point struct {
	x int     // iteration
	y float64 // value
}

// buildCharts derives both series from a run's steps: the cost summed up
// to each iteration, and the failing-test count of each iteration's last
// verification that reported one (an unknown count is left out, never
// drawn as 0).
func buildCharts(steps []api.Step) charts {
	var cost, failing []point
	total := 0.0
	for i, st := range steps {
		total += st.Usage.CostUSD
		last := i == len(steps)-1 || steps[i+1].Iteration != st.Iteration
		if st.Phase == api.PhaseVerification && st.Tests != nil && st.Tests.Failed != nil {
			if n := len(failing); n > 0 && failing[n-1].x == st.Iteration {
				failing[n-1].y = float64(*st.Tests.Failed)
			} else {
				failing = append(failing, point{st.Iteration, float64(*st.Tests.Failed)})
			}
		}
		if last && st.Iteration > 0 {
			cost = append(cost, point{st.Iteration, total})
		}
	}
	c := charts{HasCost: len(cost) > 0 && total > 0, HasTest: len(failing) > 0}
	if c.HasCost {
		c.Cost = svgChart("Cumulative cost (USD)", downsample(cost), usagefmt.USD, "cost")
	}
	if c.HasTest {
		c.Failing = svgChart("Failing tests", downsample(failing), func(v float64) string { return fmt.Sprintf("%.0f", v) }, "failing")
	}
	return c
}

// downsample keeps at most maxPoints points, each bucket's highest value
// at its last iteration (a cumulative series keeps its shape, a spike of
// failures is never averaged away).
func downsample(ps []point) []point {
	if len(ps) <= maxPoints {
		return ps
	}
	out := make([]point, 0, maxPoints)
	per := (len(ps) + maxPoints - 1) / maxPoints
	for i := 0; i < len(ps); i += per {
		b := ps[i:min(i+per, len(ps))]
		p := b[len(b)-1]
		for _, q := range b {
			p.y = max(p.y, q.y)
		}
		out = append(out, p)
	}
	return out
}

// svgChart draws a line chart with its axes' extremes labelled. Every
// string in it is either a constant or a number formatted here, so it is
// safe HTML.
func svgChart(title string, ps []point, label func(float64) string, class string) template.HTML {
	const w, h, left, bottom, top, right = 600, 160, 56, 22, 10, 10
	minX, maxX := ps[0].x, ps[len(ps)-1].x
	maxY := 0.0
	for _, p := range ps {
		maxY = max(maxY, p.y)
	}
	if maxY == 0 {
		maxY = 1
	}
	sx := func(x int) float64 {
		if maxX == minX {
			return left + (w-left-right)/2
		}
		return left + float64(x-minX)/float64(maxX-minX)*(w-left-right)
	}
	sy := func(y float64) float64 { return top + (1-y/maxY)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart %s" viewBox="0 0 %d %d" role="img" aria-label="%s">`, class, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, top, left, h-bottom)
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, top+10, template.HTMLEscapeString(label(maxY)))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">%s</text>`, left-4, h-bottom, template.HTMLEscapeString(label(0)))
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d">#%d</text>`, left, h-6, minX)
	fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="end">#%d</text>`, w-right, h-6, maxX)
	b.WriteString(`<polyline class="line" points="`)
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", sx(p.x), sy(p.y))
	}
	b.WriteString(`"/>`)
	if len(ps) <= 60 {
		for _, p := range ps {
			fmt.Fprintf(&b, `<circle class="dot" cx="%.1f" cy="%.1f" r="3"><title>#%d: %s</title></circle>`,
				sx(p.x), sy(p.y), p.x, template.HTMLEscapeString(label(p.y)))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped labels only
}
