package proxk

import (
	"fmt"
	"slices"
	"testing"
)

// TestBlockLayout checks that the groups of a blocked layout cover every
// element of the tensor exactly once, in the documented positions, that
// Gather pads a last, partial block with zeros and that Scatter writes
// back only the rows that exist.
func TestBlockLayout(t *testing.T) {
	for _, shape := range [][]int{{16, 3, 3, 3}, {40, 8, 3, 3}, {10, 64}, {33, 7}, {5}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			l := LayoutOf(GroupBlock, shape)
			n := 1
			for _, d := range shape {
				n *= d
			}
			if l.Len() != n {
				t.Fatalf("Len %d, want %d", l.Len(), n)
			}
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(i + 1)
			}
			seen := make([]int, n)
			buf := make([]float32, l.Size)
			for g := range l.Count {
				for i := range buf {
					buf[i] = -1
				}
				l.Gather(buf, src, g)
				for o, v := range buf {
					if v == 0 {
						continue // padding of a last block
					}
					i := int(v) - 1
					seen[i]++
					if len(shape) >= 2 {
						cols := n / shape[0]
						if row, col := i/cols, i%cols; row != g/cols*BlockWidth+o || col != g%cols {
							t.Fatalf("group %d position %d holds element (%d, %d)", g, o, row, col)
						}
					}
				}
				for o := range buf {
					buf[o] = -float32(g + 1)
				}
				dst := slices.Clone(src)
				l.Scatter(dst, buf, g)
				changed := 0
				for i := range dst {
					if dst[i] != src[i] {
						changed++
					}
				}
				if want := min(l.Size, shape[0]-g/max(l.Stride, 1)*BlockWidth); len(shape) >= 2 && changed != want {
					t.Fatalf("Scatter of group %d changed %d elements, want %d", g, changed, want)
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("element %d in %d groups", i, c)
				}
			}
		})
	}
}
