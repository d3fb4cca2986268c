package cli

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// A picture of the cell tree: nested boxes (rack, node, socket, switch as
// the chain's levels are), each leaf cell a square coloured by the VC of
// the group using it (or the VC it is bound to, lightly, when free),
// opportunistic use hatched, cells reserved for a preemptor outlined, bad
// hardware crossed out in red. Cells above node level are laid out in a
// grid, a node's cells in a row, so 10k nodes still make one picture.

// pbox is a laid-out cell; x and y are relative to its parent.
type pbox struct {
	x, y, w, h int
	cell       *iv1.Cell
	label      string
	kids       []*pbox
}

type picture struct {
	w, h    int
	leaf    int // side of a leaf square
	labels  bool
	chains  []chainBox
	vcs     []string          // in legend order
	colour  map[string]rgb    // per VC
	groupVC map[string]string // group -> VC, for opportunistic use
}

type chainBox struct {
	x, y  int
	title string
	tops  *pbox // a synthetic box holding the chain's top cells
}

type rgb struct{ r, g, b uint8 }

func (c rgb) hex() string { return fmt.Sprintf("#%02x%02x%02x", c.r, c.g, c.b) }

// tint mixes c with white: f 0 is c, 1 is white.
func (c rgb) tint(f float64) rgb {
	m := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*f) }
	return rgb{m(c.r), m(c.g), m(c.b)}
}

// palette: distinguishable colours (Okabe-Ito and Tableau), in order.
var palette = []rgb{
	{0x00, 0x72, 0xb2}, {0xe6, 0x9f, 0x00}, {0x00, 0x9e, 0x73}, {0xcc, 0x79, 0xa7}, {0x56, 0xb4, 0xe9},
	{0xd5, 0x5e, 0x00}, {0x8c, 0x56, 0x4b}, {0x7f, 0x3c, 0x8d}, {0x3b, 0x7d, 0x23}, {0x1f, 0x3a, 0x93},
}

var (
	grey       = rgb{0xe8, 0xe8, 0xe8}
	border     = rgb{0x99, 0x99, 0x99}
	black      = rgb{0x22, 0x22, 0x22}
	white      = rgb{0xff, 0xff, 0xff}
	red        = rgb{0xd0, 0x10, 0x10}
	unknownOpp = rgb{0x70, 0x70, 0x70}
)

const legendHeight = 44

func layoutPicture(cells *iv1.ClusterCells, groupVC map[string]string) *picture {
	p := &picture{leaf: 10, labels: true, colour: map[string]rgb{}, groupVC: groupVC}
	leaves := 0
	vcs := map[string]bool{}
	var scan func(c *iv1.Cell)
	scan = func(c *iv1.Cell) {
		if c.VirtualCluster != "" {
			vcs[c.VirtualCluster] = true
		}
		if len(c.Children) == 0 {
			leaves++
			if vc := groupVC[c.Group]; vc != "" {
				vcs[vc] = true
			}
		}
		for i := range c.Children {
			scan(&c.Children[i])
		}
	}
	for ci := range cells.Chains {
		for i := range cells.Chains[ci].Cells {
			scan(&cells.Chains[ci].Cells[i])
		}
	}
	if leaves > 20000 {
		p.leaf, p.labels = 4, false
	}
	p.vcs = slices.Sorted(func(yield func(string) bool) {
		for v := range vcs {
			if !yield(v) {
				return
			}
		}
	})
	for i, v := range p.vcs {
		p.colour[v] = palette[i%len(palette)]
	}
	y := legendHeight
	for ci := range cells.Chains {
		ch := &cells.Chains[ci]
		top := &pbox{}
		for i := range ch.Cells {
			top.kids = append(top.kids, p.layout(&ch.Cells[i]))
		}
		p.grid(top, 0, 6)
		title := fmt.Sprintf("%s (%s)", ch.Name, strings.Join(ch.Levels, " < "))
		cb := chainBox{x: 8, y: y + 14, title: title, tops: top}
		p.chains = append(p.chains, cb)
		y += 14 + top.h + 10
		p.w = max(p.w, top.w+16)
	}
	// The legend's second row is the widest line of text.
	legend := 8
	for _, l := range legendLabels {
		legend += 14 + len(l)*7 + 12
	}
	p.w = max(p.w, legend)
	p.h = y
	return p
}

func (p *picture) layout(c *iv1.Cell) *pbox {
	b := &pbox{cell: c}
	if len(c.Children) == 0 {
		b.w, b.h = p.leaf, p.leaf
		return b
	}
	for i := range c.Children {
		b.kids = append(b.kids, p.layout(&c.Children[i]))
	}
	if c.Node != "" {
		// Within a node: a row, wider gaps between higher levels.
		pad, gap := 1, max(c.Level-2, 0)+1
		lh := 0
		if p.labels && c.Node == c.Address {
			lh, b.label = 11, c.Address
		}
		x, h := pad, 0
		for _, k := range b.kids {
			k.x, k.y = x, pad+lh
			x += k.w + gap
			h = max(h, k.h)
		}
		b.w, b.h = max(x-gap+pad, len(b.label)*6+2), h+2*pad+lh
		return b
	}
	lh := 0
	if p.labels {
		lh, b.label = 12, c.CellType+" "+c.Address
	}
	p.grid(b, lh, 3)
	return b
}

// grid lays b's children out in rows of about sqrt(n), under a label of
// height lh.
func (p *picture) grid(b *pbox, lh, pad int) {
	n := len(b.kids)
	if n == 0 {
		b.w, b.h = 2*pad, 2*pad+lh
		return
	}
	cols := int(math.Ceil(math.Sqrt(float64(n))))
	x, y, rowH, w := pad, pad+lh, 0, 0
	for i, k := range b.kids {
		if i > 0 && i%cols == 0 {
			x, y = pad, y+rowH+pad
			rowH = 0
		}
		k.x, k.y = x, y
		x += k.w + pad
		rowH = max(rowH, k.h)
		w = max(w, x)
	}
	b.w = max(w, len(b.label)*7+2*pad)
	b.h = y + rowH + pad
}

// paint is what a canvas (SVG or PNG) must draw.
type canvas interface {
	rect(x, y, w, h int, fill rgb)
	outline(x, y, w, h int, c rgb)
	hatch(x, y, w, h int, c rgb)
	cross(x, y, w, h int, c rgb)
	text(x, y int, s string, c rgb)
}

// leafStyle: fill, whether hatched or outlined, and the colour used.
func (p *picture) drawLeaf(cv canvas, x, y int, c *iv1.Cell) {
	s := p.leaf
	vcCol, bound := p.colour[c.VirtualCluster]
	switch {
	case c.State == "Reserving" || c.State == "Reserved":
		col := border
		if bound {
			col = vcCol
		}
		cv.rect(x, y, s, s, white)
		cv.hatch(x, y, s, s, col)
		cv.outline(x, y, s, s, col)
	case c.State == "Used" && c.Priority != nil && *c.Priority < 0:
		col := unknownOpp
		if v, ok := p.colour[p.groupVC[c.Group]]; ok {
			col = v
		}
		cv.rect(x, y, s, s, col.tint(0.55))
		cv.hatch(x, y, s, s, col)
	case c.State == "Used":
		col := unknownOpp
		if v, ok := p.colour[p.groupVC[c.Group]]; ok {
			col = v
		} else if bound {
			col = vcCol
		}
		cv.rect(x, y, s, s, col)
	case bound:
		cv.rect(x, y, s, s, vcCol.tint(0.75))
	default:
		cv.rect(x, y, s, s, grey)
	}
	if c.Health != "" && c.Health != "good" {
		cv.cross(x, y, s, s, red)
	}
}

func (p *picture) draw(cv canvas) {
	cv.rect(0, 0, p.w, p.h, white)
	p.drawLegend(cv)
	for _, ch := range p.chains {
		cv.text(ch.x, ch.y-3, ch.title, black)
		for _, k := range ch.tops.kids {
			p.drawBox(cv, ch.x+k.x, ch.y+k.y, k)
		}
	}
}

func (p *picture) drawBox(cv canvas, x, y int, b *pbox) {
	if len(b.kids) == 0 {
		p.drawLeaf(cv, x, y, b.cell)
		return
	}
	col := border
	if v, ok := p.colour[b.cell.VirtualCluster]; ok && b.cell.Node == b.cell.Address && b.cell.Node != "" {
		col = v // a node bound to a VC
	}
	cv.outline(x, y, b.w, b.h, col)
	if b.label != "" {
		cv.text(x+2, y+10, b.label, black)
	}
	for _, k := range b.kids {
		p.drawBox(cv, x+k.x, y+k.y, k)
	}
	if b.cell.Health != "" && b.cell.Health != "good" && b.cell.Node == b.cell.Address {
		cv.outline(x-1, y-1, b.w+2, b.h+2, red)
	}
}

func (p *picture) drawLegend(cv canvas) {
	x, y := 8, 6
	sw := func(label string, paint func(x, y int)) {
		paint(x, y)
		cv.text(x+14, y+9, label, black)
		x += 14 + len(label)*7 + 12
	}
	for _, v := range p.vcs {
		c := p.colour[v]
		sw(v, func(x, y int) { cv.rect(x, y, 10, 10, c) })
	}
	x, y = 8, 24
	l := legendLabels
	sw(l[0], func(x, y int) { cv.rect(x, y, 10, 10, unknownOpp) })
	sw(l[1], func(x, y int) { cv.rect(x, y, 10, 10, unknownOpp.tint(0.55)); cv.hatch(x, y, 10, 10, unknownOpp) })
	sw(l[2], func(x, y int) {
		cv.rect(x, y, 10, 10, white)
		cv.hatch(x, y, 10, 10, border)
		cv.outline(x, y, 10, 10, border)
	})
	sw(l[3], func(x, y int) { cv.rect(x, y, 10, 10, palette[0].tint(0.75)) })
	sw(l[4], func(x, y int) { cv.rect(x, y, 10, 10, grey) })
	sw(l[5], func(x, y int) { cv.rect(x, y, 10, 10, grey); cv.cross(x, y, 10, 10, red) })
}

var legendLabels = []string{"used (colour: its group's VC)", "opportunistic", "reserved for a preemptor", "free, bound to a VC", "free", "bad"}

// --- SVG ---

type svgCanvas struct {
	w        *bufio.Writer
	patterns map[rgb]bool
	body     strings.Builder
}

func (s *svgCanvas) rect(x, y, w, h int, fill rgb) {
	fmt.Fprintf(&s.body, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x, y, w, h, fill.hex())
}

func (s *svgCanvas) outline(x, y, w, h int, c rgb) {
	fmt.Fprintf(&s.body, `<rect x="%d.5" y="%d.5" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", x, y, w-1, h-1, c.hex())
}

func (s *svgCanvas) hatch(x, y, w, h int, c rgb) {
	s.patterns[c] = true
	fmt.Fprintf(&s.body, `<rect x="%d" y="%d" width="%d" height="%d" fill="url(#h%s)"/>`+"\n", x, y, w, h, c.hex()[1:])
}

func (s *svgCanvas) cross(x, y, w, h int, c rgb) {
	fmt.Fprintf(&s.body, `<path d="M%d %dL%d %dM%d %dL%d %d" stroke="%s" stroke-width="1.5"/>`+"\n", x, y, x+w, y+h, x+w, y, x, y+h, c.hex())
}

func (s *svgCanvas) text(x, y int, t string, c rgb) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	fmt.Fprintf(&s.body, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x, y, c.hex(), r.Replace(t))
}

func (p *picture) writeSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	s := &svgCanvas{w: bw, patterns: map[rgb]bool{}}
	p.draw(s)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="10">`+"\n", p.w, p.h, p.w, p.h)
	fmt.Fprintln(bw, "<defs>")
	cols := make([]rgb, 0, len(s.patterns))
	for c := range s.patterns {
		cols = append(cols, c)
	}
	slices.SortFunc(cols, func(a, b rgb) int { return strings.Compare(a.hex(), b.hex()) })
	for _, c := range cols {
		fmt.Fprintf(bw, `<pattern id="h%s" width="4" height="4" patternUnits="userSpaceOnUse"><path d="M0 4L4 0" stroke="%s" stroke-width="1"/></pattern>`+"\n", c.hex()[1:], c.hex())
	}
	fmt.Fprintln(bw, "</defs>")
	bw.WriteString(s.body.String())
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// --- PNG ---

type pngCanvas struct{ img *image.RGBA }

func (c pngCanvas) set(x, y int, col rgb) {
	if (image.Point{x, y}).In(c.img.Rect) {
		i := c.img.PixOffset(x, y)
		c.img.Pix[i], c.img.Pix[i+1], c.img.Pix[i+2], c.img.Pix[i+3] = col.r, col.g, col.b, 0xff
	}
}

func (c pngCanvas) rect(x, y, w, h int, fill rgb) {
	for j := y; j < y+h; j++ {
		for i := x; i < x+w; i++ {
			c.set(i, j, fill)
		}
	}
}

func (c pngCanvas) outline(x, y, w, h int, col rgb) {
	for i := x; i < x+w; i++ {
		c.set(i, y, col)
		c.set(i, y+h-1, col)
	}
	for j := y; j < y+h; j++ {
		c.set(x, j, col)
		c.set(x+w-1, j, col)
	}
}

func (c pngCanvas) hatch(x, y, w, h int, col rgb) {
	for j := y; j < y+h; j++ {
		for i := x; i < x+w; i++ {
			if (i+j)%4 == 0 {
				c.set(i, j, col)
			}
		}
	}
}

func (c pngCanvas) cross(x, y, w, h int, col rgb) {
	n := min(w, h)
	for k := 0; k < n; k++ {
		c.set(x+k, y+k, col)
		c.set(x+n-1-k, y+k, col)
	}
}

func (c pngCanvas) text(x, y int, s string, col rgb) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(color.RGBA{col.r, col.g, col.b, 0xff}), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func (p *picture) writePNG(w io.Writer) error {
	c := pngCanvas{img: image.NewRGBA(image.Rect(0, 0, p.w, p.h))}
	p.draw(c)
	bw := bufio.NewWriter(w)
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(bw, c.img); err != nil {
		return err
	}
	return bw.Flush()
}
