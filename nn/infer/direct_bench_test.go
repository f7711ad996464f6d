package infer

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// BenchmarkDirectLayers times, one image on one thread, every convolution
// of the direct plan of the shipped resnet20-dense, resnet20-compact and
// resnet20-block files as the plan runs it, and for the layers that skip
// zero filter vectors the same layer with its filters packed dense
// ("name/dense-kernel"), for those where Winograd pays the same layer
// with it ("name/winograd", its executed multiply-adds those of its 16
// products, nchwc.WinoFilter.MACs), for those where it applies but the
// plan runs the direct kernels instead ("name/winograd-not-chosen",
// winoPays): µs per call, the layer's multiply-adds
// (M-MAC, cout·cin·k·k per output pixel), those the kernels execute
// (M-exec-MAC, nchwc.Filter.MACs: the nonzero filter vectors times their
// lanes, padding lanes included) and the executed ones' rate (G-exec-MAC/s).
// docs/benchmarks.md's block- and compact-network tables are its output.
func BenchmarkDirectLayers(b *testing.B) {
	if !nchwc.Fast() {
		b.Skip("nchwc has no fast kernels on this machine")
	}
	for _, file := range []string{"dense", "compact", "block"} {
		r := shippedResNet(b, file)
		p := newDirectPlan(r, nil, map[string]bool{})
		if p == nil {
			b.Fatalf("resnet20-%s does not compile to the direct plan", file)
		}
		d := p.net.(*directResNet)
		convs, layers := []*directConv{&d.stem}, []convLayer{r.stem}
		for i := range d.blocks {
			db, rb := &d.blocks[i], r.blocks[i]
			convs, layers = append(convs, &db.conv1, &db.conv2), append(layers, rb.conv1, rb.conv2)
			if db.shortcut != nil {
				convs, layers = append(convs, db.shortcut), append(layers, *rb.shortcut)
			}
		}
		for i, c := range convs {
			in := nchwc.NewAct(c.in.c, c.in.h, c.in.w)
			if i == 0 {
				in = nchwc.NewImage(c.in.c, c.in.h, c.in.w)
			}
			for k := range in.Data {
				in.Data[k] = float32(k%7) * 0.1
			}
			out := nchwc.NewAct(c.out.c, c.out.h, c.out.w)
			macs := float64(c.f.Cout * c.in.c * c.f.K * c.f.K * c.out.h * c.out.w)
			run := func(name string, cc *directConv) {
				exec := float64(cc.f.MACs(c.out.h, c.out.w))
				if cc.wf != nil {
					exec = float64(cc.wf.MACs(c.out.h, c.out.w))
				}
				b.Run(fmt.Sprintf("%s/%02d_%s_%dto%d_%dpx/%s", file, i, layers[i].name, c.in.c, c.out.c, c.in.h, name), func(b *testing.B) {
					defer parallel.SetWorkers(parallel.SetWorkers(1))
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
					for range b.N {
						cc.run(in, nil, out, 1)
					}
					us := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N)
					b.ReportMetric(us, "µs/layer")
					b.ReportMetric(macs/1e6, "M-MAC")
					b.ReportMetric(exec/1e6, "M-exec-MAC")
					b.ReportMetric(exec/us/1e3, "G-exec-MAC/s")
				})
			}
			run(c.algorithm(), c)
			if wc, ok := c.winograd(); ok {
				run("winograd", &wc)
			} else if c.winogradFits() {
				wc := c.withWinograd()
				run("winograd-not-chosen", &wc)
			}
			if c.skip {
				w, _ := foldWeights(layers[i].conv, layers[i].bn)
				dense := *c
				dense.f = nchwc.PackFilter(w.Data, c.out.c, c.in.c, c.f.K)
				run("dense-kernel", &dense)
			}
		}
	}
}

// BenchmarkResNetFeatures times the final average pooling of the shipped
// resnet20-dense's direct plan (64 channels of 8×8 pixels) on one image.
func BenchmarkResNetFeatures(b *testing.B) {
	r := shippedResNet(b, "dense")
	p := newDirectPlan(r, nil, map[string]bool{})
	if p == nil {
		b.Skip("resnet20-dense does not compile to the direct plan here")
	}
	d := p.net.(*directResNet)
	out := nchwc.NewAct(64, 8, 8)
	for k := range out.Data {
		out.Data[k] = float32(k%13) * 0.25
	}
	dst := make([]float32, 64)
	for b.Loop() {
		d.features(out, dst)
	}
}
