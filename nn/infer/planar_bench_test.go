package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

// planarSparseFile returns the planar plan of the shipped resnet20-sparse,
// or of the model file named by $PLANAR_FILE (a ResNet-20 safetensors
// file, as for infer.Load) when it is set.
func planarSparseFile(b *testing.B) *planarPlan { return planarSparseFileWith(b, planarDefaults()) }

// planarSparseFileWith is planarSparseFile compiled with opt.
func planarSparseFileWith(b *testing.B, opt planarOptions) *planarPlan {
	var r *resnetNet
	if path := os.Getenv("PLANAR_FILE"); path != "" {
		r = resNetFile(b, path)
	} else {
		r = shippedResNet(b, "sparse")
	}
	p := newPlanarPlan(r, false, opt)
	if p == nil {
		b.Fatal("the sparse file does not compile to the planar plan")
	}
	return p
}

// shippedResNet returns the graph of the shipped file resnet20-NAME of
// nn/pretrained.
func shippedResNet(tb testing.TB, name string) *resnetNet {
	tb.Helper()
	return resNetFile(tb, filepath.Join("..", "pretrained", "models", "resnet20-"+name+".safetensors"))
}

// resNetFile returns the graph of the ResNet in the model file path.
func resNetFile(tb testing.TB, path string) *resnetNet {
	tb.Helper()
	f, err := safetensors.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	net, _, err := Network(f, models.Spec{})
	if err != nil {
		tb.Fatal(err)
	}
	r, _ := network(net)
	if r == nil {
		tb.Fatalf("%s is not a ResNet", path)
	}
	return r
}

// planarImage returns an input image of fixed values.
func planarImage() []float32 {
	x := make([]float32, InputSize)
	for i := range x {
		x[i] = float32(i%13) * 0.1
	}
	return x
}

// medianUs returns the median of t (µs) and sorts t.
func medianUs(t []float64) float64 {
	slices.Sort(t)
	return t[len(t)/2]
}

// BenchmarkPlanarSplit times single images of resnet20-sparse on the
// planar plan with 2 workers, kept on one worker (whole) and split over
// both in bands of rows (split; also with the single convolutions on band
// 0 alone instead of split by channels), alternated round by round (60 rounds of
// 50 images, the first dropped) so that load from other processes falls
// on both alike: the 10th percentile and the median µs per image of
// each (logged), and the split's speed-up by the medians (reported).
// With -v it adds controls and the split with other exchange intervals
// and with and without ping-pong buffers (planarOptions).
func BenchmarkPlanarSplit(b *testing.B) {
	p, x := planarSparseFile(b), planarImage()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer parallel.SetWorkers(parallel.SetWorkers(2))
	pooled, logits := make([]float32, p.features()), make([]float32, p.classifier.Weight.Dim(0))
	type variant struct {
		name  string
		p     *planarPlan
		parts int
		s     *scratch
	}
	bandOnly := *p
	bandOnly.bandOnly = true
	vs := []variant{{"whole", p, 1, &scratch{}}, {fmt.Sprintf("split, exchange every %d blocks", planarDefaults().exchangeEvery), p, 2, &scratch{}},
		{"split, 8×8 layers on band 0 alone", &bandOnly, 2, &scratch{}}}
	if testing.Verbose() {
		// Controls: the split's work on one worker; two images at once,
		// one per worker (µs per pair: the second core's state).
		vs = append(vs, variant{"split, on one worker", p, -2, &scratch{}}, variant{"two images, one per worker", p, 0, &scratch{}})
		// Other exchange intervals and buffers, for planarDefaults.
		for _, e := range []int{1, 2, 3, 100} {
			opt := planarDefaults()
			opt.exchangeEvery = e
			vs = append(vs, variant{fmt.Sprintf("split, exchange every %d blocks", e), planarSparseFileWith(b, opt), 2, &scratch{}})
		}
		for _, pp := range []bool{false, true} {
			opt := planarDefaults()
			opt.pingPong = pp
			vs = append(vs, variant{fmt.Sprintf("split, ping-pong %v", pp), planarSparseFileWith(b, opt), 2, &scratch{}})
			vs = append(vs, variant{fmt.Sprintf("whole, ping-pong %v", pp), planarSparseFileWith(b, opt), 1, &scratch{}})
		}
	}
	const rounds, per = 60, 50
	t := make([][]float64, len(vs))
	for range b.N {
		for r := range rounds {
			for k, v := range vs {
				parts := v.parts
				if parts < 0 { // on one worker
					parts = -parts
					parallel.SetWorkers(1)
				}
				run := func() {
					acts := v.s.planarActs(v.p, parts)
					v.p.images(acts, x, pooled, logits, 0, 1)
				}
				if parts == 0 {
					x2 := append(slices.Clone(x), x...)
					run = func() { v.p.forward(v.s, x2, 2) }
				}
				run()
				for range per {
					t0 := time.Now()
					run()
					if r > 0 {
						t[k] = append(t[k], float64(time.Since(t0).Nanoseconds())/1e3)
					}
				}
				parallel.SetWorkers(2)
			}
		}
	}
	for k, v := range vs {
		m := medianUs(t[k])
		b.Logf("%-32s µs per image: 10th percentile %6.1f, median %6.1f (%d images)", v.name, t[k][len(t[k])/10], m, len(t[k]))
	}
	b.ReportMetric(medianUs(t[0])/medianUs(t[1]), "speed-up")
}

// BenchmarkPlanarPhases times every phase of resnet20-sparse's planar
// plan on one image: on one worker, split over 2 (each band's time, the
// phase's span from the first band's start to the last one's end, and
// how often the two bands did not overlap at all), and the two bands one
// after the other on one worker: medians over 3000 images, logged per
// phase.
func BenchmarkPlanarPhases(b *testing.B) {
	p, x := planarSparseFile(b), planarImage()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer parallel.SetWorkers(parallel.SetWorkers(2))
	one, two := (&scratch{}).planarActs(p, 1), (&scratch{}).planarActs(p, 2)
	size := inputShape.h * inputShape.w
	for _, acts := range [][]*planarActs{one, two} {
		for k, a := range acts {
			p.rows(k, len(acts), a)
			for c := range inputShape.c {
				a.image.SetImage(c, x[c*size:(c+1)*size])
			}
		}
	}
	np := len(p.phases)
	const reps = 3000
	alone := make([][]float64, np)
	band := make([][2][]float64, np)
	span := make([][]float64, np)
	serial := make([][2][]float64, np)
	apart := make([]int, np)
	start, end := make([][2]time.Time, np), make([][2]time.Time, np)
	for range b.N {
		for r := range reps {
			if r%100 == 50 {
				for range 100 {
					for ph := range np {
						for k := range 2 {
							t0 := time.Now()
							for i := range p.phases[ph] {
								p.phases[ph][i].run(p, two, k)
							}
							serial[ph][k] = append(serial[ph][k], float64(time.Since(t0).Nanoseconds())/1e3)
						}
					}
				}
			}
			if r%100 == 0 {
				for range 100 {
					for ph := range np {
						t0 := time.Now()
						for i := range p.phases[ph] {
							p.phases[ph][i].run(p, one, 0)
						}
						alone[ph] = append(alone[ph], float64(time.Since(t0).Nanoseconds())/1e3)
					}
				}
			}
			parallel.Phases(2, np, func(ph, k int) {
				start[ph][k] = time.Now()
				for i := range p.phases[ph] {
					p.phases[ph][i].run(p, two, k)
				}
				end[ph][k] = time.Now()
			})
			for ph := range np {
				for k := range 2 {
					band[ph][k] = append(band[ph][k], float64(end[ph][k].Sub(start[ph][k]).Nanoseconds())/1e3)
				}
				lo, hi := start[ph][0], end[ph][0]
				if start[ph][1].Before(lo) {
					lo = start[ph][1]
				}
				if end[ph][1].After(hi) {
					hi = end[ph][1]
				}
				span[ph] = append(span[ph], float64(hi.Sub(lo).Nanoseconds())/1e3)
				if !start[ph][1].Before(end[ph][0]) || !start[ph][0].Before(end[ph][1]) {
					apart[ph]++
				}
			}
		}
	}
	var sa, sb, ss float64
	for ph := range np {
		c := p.phases[ph][0].conv
		m1, b0, b1, w := medianUs(alone[ph]), medianUs(band[ph][0]), medianUs(band[ph][1]), medianUs(span[ph])
		sa, sb, ss = sa+m1, sb+max(b0, b1), ss+w
		macs := 0
		for _, t := range p.phases[ph] {
			macs += t.conv.f.NNZ() * t.conv.f.OutSize()
		}
		b.Logf("phase %2d (%d steps) %2d→%2d %2d×%2d: one worker %5.2f µs (%4.1f GMAC/s); bands %5.2f %5.2f, span %5.2f; bands apart %d of %d; serial bands %5.2f %5.2f",
			ph, len(p.phases[ph]), c.f.Cin, c.f.Cout, c.f.Ho, c.f.Wo, m1, float64(macs)/m1/1e3, b0, b1, w, apart[ph], reps, medianUs(serial[ph][0]), medianUs(serial[ph][1]))
	}
	b.Logf("sums of the medians: one worker %.1f µs, slower band %.1f, span %.1f", sa, sb, ss)
}

// BenchmarkPlanarSharedStore times the store of one 32×32 layer of
// resnet20-sparse (block 1's conv2, 16 channels, Shifted) by two workers
// at once, each storing half of the rows 2000 times, into one shared
// buffer (gap: rows between the halves left out) and into a buffer of its
// own: µs per store of each worker, logged. The store of two bands of one
// buffer ran 2–4× slower than of each on its own buffer, which is why the
// split image keeps a set of buffers per band.
func BenchmarkPlanarSharedStore(b *testing.B) {
	p := planarSparseFile(b)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer parallel.SetWorkers(parallel.SetWorkers(2))
	c := &p.blocks[1].conv2
	ho, n := c.f.Ho, c.f.OutSize()
	y := make([]float32, c.f.Cout*n)
	for i := range y {
		y[i] = float32(i%17) - 8
	}
	bufs := [2]*nchwc.Planar{}
	for k := range bufs {
		bufs[k] = nchwc.NewPlanar(c.f.Cout, ho, c.f.Wo, nchwc.Shifted)
	}
	const reps = 2000
	store := func(gap int, own bool) [2]float64 {
		var d [2]float64
		parallel.For(2, 1, func(lo, hi int) {
			for k := lo; k < hi; k++ {
				r0, r1 := 0, ho/2-gap
				if k == 1 {
					r0, r1 = ho/2+gap, ho
				}
				dst := bufs[0]
				if own {
					dst = bufs[k]
				}
				t0 := time.Now()
				for range reps {
					nchwc.StoreRows(dst, y, nil, true, 0, c.f.Cout, r0, r1)
				}
				d[k] = float64(time.Since(t0).Nanoseconds()) / 1e3 / reps
			}
		})
		return d
	}
	for range b.N {
		for range 3 {
			s0, s2, so := store(0, false), store(2, false), store(0, true)
			b.Logf("%s: shared buffer %.2f %.2f µs, shared with 4 rows between %.2f %.2f, own buffers %.2f %.2f",
				fmt.Sprintf("%d×%d×%d", c.f.Cout, ho, c.f.Wo), s0[0], s0[1], s2[0], s2[1], so[0], so[1])
		}
	}
}

// BenchmarkPlanarImage times single images of the planar plan of
// resnet20-sparse (or $PLANAR_FILE) on one worker (parts=1) and split
// over two (parts=2), under each implementation of the kernels that the
// CPU supports: a profile target for the sparse kernels.
func BenchmarkPlanarImage(b *testing.B) {
	p, x := planarSparseFile(b), planarImage()
	pooled, logits := make([]float32, p.features()), make([]float32, p.classifier.Weight.Dim(0))
	names, supported := impl.List("kernels")
	for i, kern := range names {
		if !supported[i] {
			continue
		}
		for _, parts := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/parts=%d", kern, parts), func(b *testing.B) {
				impl.Select("kernels", kern)
				defer impl.Reset("kernels")
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(parts))
				defer parallel.SetWorkers(parallel.SetWorkers(parts))
				acts := (&scratch{}).planarActs(p, parts)
				p.images(acts, x, pooled, logits, 0, 1)
				b.ResetTimer()
				cpu0, _ := procstat.CPUTime()
				for range b.N {
					p.images(acts, x, pooled, logits, 0, 1)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
				if cpu1, _ := procstat.CPUTime(); cpu1 > cpu0 {
					// CPU time: less sensitive than wall time to other
					// processes on a shared machine.
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/img")
				}
				b.ReportMetric(float64(b.N)*float64(p.macs())/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// macs returns the multiply-adds of one image's convolutions on p: each
// nonzero weight once per output pixel.
func (p *planarPlan) macs() int {
	n := 0
	for _, ph := range p.phases {
		for _, t := range ph {
			n += t.conv.f.NNZ() * t.conv.f.OutSize()
		}
	}
	return n
}
