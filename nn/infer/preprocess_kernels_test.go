package infer

import (
	"image"
	"image/color"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/impl"
)

// guard is the value the kernel tests put past the end of every output,
// which no kernel may overwrite.
const guard = -7

func guarded(n int) []int32 {
	s := make([]int32, n+16)
	for i := range s {
		s[i] = guard
	}
	return s
}

func randBytes(rng *rand.Rand, n int) []uint8 {
	b := make([]uint8, n)
	for i := range b {
		switch rng.IntN(8) {
		case 0:
			b[i] = 0
		case 1:
			b[i] = 255
		default:
			b[i] = uint8(rng.Uint32())
		}
	}
	return b
}

// TestRawImageYCbCrKernels checks every implementation of ycc1 and ycc2
// (the Go loops and the assembly kernels, through impl) against
// color.YCbCrToRGB for all lengths up to 80 at offsets that misalign the
// rows, and that none writes past its length.
func TestRawImageYCbCrKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	impl.ForEach("infer", func(name string) {
		for n := range 81 {
			for off := range 3 {
				yrow, cb, cr := randBytes(rng, n+off), randBytes(rng, n+off), randBytes(rng, n+off)
				for _, pairs := range []bool{false, true} {
					r, g, b := guarded(n), guarded(n), guarded(n)
					if pairs {
						nc := (n + 1) / 2
						ycc2(r[:n], g[:n], b[:n], yrow[off:], cb[off:off+nc], cr[off:off+nc])
					} else {
						ycc1(r[:n], g[:n], b[:n], yrow[off:], cb[off:], cr[off:])
					}
					for x := range n + 16 {
						var wr, wg, wb int32 = guard, guard, guard
						if x < n {
							c := off + x
							if pairs {
								c = off + x/2
							}
							r8, g8, b8 := color.YCbCrToRGB(yrow[off+x], cb[c], cr[c])
							wr, wg, wb = int32(r8), int32(g8), int32(b8)
						}
						if r[x] != wr || g[x] != wg || b[x] != wb {
							t.Fatalf("%s: pairs %v, n %d, offset %d: pixel %d is %d %d %d, want %d %d %d",
								name, pairs, n, off, x, r[x], g[x], b[x], wr, wg, wb)
						}
					}
				}
			}
		}
	})
}

// TestRawImageResampleKernels checks every implementation of hdot and vdot
// against the sums written out here, with int32 arithmetic as PIL's: on
// random filters (windows of every padded length up to 72 at random
// offsets, near the end of the planes included) with realistic weights
// and with arbitrary int32 weights, whose sums wrap and clamp at both
// ends; and hdot on the flattened weights of real resizes against the
// ragged windows they come from.
func TestRawImageResampleKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	weight := func(wild bool) int32 {
		if wild {
			return int32(rng.Uint32())
		}
		return int32(rng.IntN(1<<precision + 1))
	}
	clip := func(s int32) uint8 { return uint8(min(max(s>>precision, 0), 255)) }
	impl.ForEach("infer", func(name string) {
		for trial := range 200 {
			wild := trial%2 == 1
			taps := 8 * (1 + trial%9)
			n := taps + rng.IntN(300)
			f := hfilter{first: make([]int, Side), k: make([]int32, Side*taps), taps: taps}
			for x := range Side {
				f.first[x] = rng.IntN(n - taps + 1)
				if x == Side-1 {
					f.first[x] = n - taps // the last window ends at the planes' end
				}
				f.end = max(f.end, f.first[x]+taps)
				for j := range taps {
					f.k[x*taps+j] = weight(wild)
				}
			}
			planes := make([][]int32, 3)
			for c := range planes {
				planes[c] = make([]int32, n)
				for i, v := range randBytes(rng, n) {
					planes[c][i] = int32(v)
				}
			}
			out := make([]uint8, 3*Side+8)
			hdot(out[:3*Side], planes[0], planes[1], planes[2], &f)
			for c := range 3 {
				for x := range Side {
					s := int32(1 << (precision - 1))
					for j := range taps {
						s += f.k[x*taps+j] * planes[c][f.first[x]+j]
					}
					if got := out[c*Side+x]; got != clip(s) {
						t.Fatalf("%s: hdot trial %d (taps %d): plane %d output %d is %d, want %d", name, trial, taps, c, x, got, clip(s))
					}
				}
			}
			if !slices.Equal(out[3*Side:], make([]uint8, 8)) {
				t.Fatalf("%s: hdot wrote past its output", name)
			}

			rows := 1 + trial%70
			mid := randBytes(rng, 3*Side*rows)
			k := make([]int32, rows)
			for j := range k {
				k[j] = weight(wild)
			}
			const plane = Side * Side
			dst := make([]uint8, 3*plane)
			for i := range dst {
				dst[i] = 0xAA
			}
			vdot(dst[Side:], mid, k)
			for i, v := range dst {
				c, x := i/plane, i%plane-Side
				if x < 0 || x >= Side {
					if v != 0xAA {
						t.Fatalf("%s: vdot wrote byte %d outside its row", name, i)
					}
					continue
				}
				s := int32(1 << (precision - 1))
				for j, kj := range k {
					s += kj * int32(mid[3*Side*j+c*Side+x])
				}
				if v != clip(s) {
					t.Fatalf("%s: vdot trial %d (%d rows): plane %d column %d is %d, want %d", name, trial, rows, c, x, v, clip(s))
				}
			}
		}

		// Real windows, flattened and padded, against the ragged ones.
		for _, c := range [][3]int{{1024, 42, 5}, {768, 32, 0}, {37, 32, 0}, {5000, 160000, 79984}, {200, 33, 0}, {3000, 35, 1}, {20, 33, 0}} {
			first, k := coefficients(c[0], c[1], c[2], Side)
			x0, x1 := span(first, k)
			f := flatten(first, k, x0)
			n := x1 - x0
			planes := make([][]int32, 3)
			for p := range planes {
				planes[p] = make([]int32, max(n, f.end))
				for i, v := range randBytes(rng, n) {
					planes[p][i] = int32(v)
				}
			}
			out := make([]uint8, 3*Side)
			hdot(out, planes[0], planes[1], planes[2], &f)
			for p := range 3 {
				for x := range Side {
					s := int32(1 << (precision - 1))
					for j, kj := range k[x] {
						s += kj * planes[p][first[x]-x0+j]
					}
					if out[p*Side+x] != clip(s) {
						t.Fatalf("%s: %d→%d from %d: plane %d output %d is %d, want %d", name, c[0], c[1], c[2], p, x, out[p*Side+x], clip(s))
					}
				}
			}
		}
	})
}

// TestRawImageImplementations runs RawImage with every implementation of
// its kernels on Y'CbCr images of every subsampling ratio at even and odd
// origins, and on an NRGBA image, and requires the same bytes.
func TestRawImageImplementations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var imgs []image.Image
	for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422,
		image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411} {
		m := image.NewYCbCr(image.Rect(0, 0, 301, 203), ratio)
		copy(m.Y, randBytes(rng, len(m.Y)))
		copy(m.Cb, randBytes(rng, len(m.Cb)))
		copy(m.Cr, randBytes(rng, len(m.Cr)))
		imgs = append(imgs, m, m.SubImage(image.Rect(1, 3, 300, 200)), m.SubImage(image.Rect(2, 1, 40, 202)), m.SubImage(image.Rect(7, 0, 39, 150)))
	}
	nrgba := image.NewNRGBA(image.Rect(0, 0, 97, 250))
	copy(nrgba.Pix, randBytes(rng, len(nrgba.Pix)))
	imgs = append(imgs, nrgba)
	for _, img := range imgs {
		var want []uint8
		impl.ForEach("infer", func(name string) {
			got := make([]uint8, cifar10.ImageSize)
			RawImage(got, img)
			if want == nil {
				want = got
			} else if !slices.Equal(got, want) {
				t.Errorf("%s: %T %v differs from the Go loops", name, img, img.Bounds())
			}
		})
	}
}
