package prune

import (
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

// Compact returns a dense copy of m (a VGG or ResNet of package
// nn/models) without its removable channels (see the package doc), and
// the channel counts of every layer of the copy: filters, biases,
// batch-norm parameters and statistics of the removed channels go, and
// so do the input slices of the convolutions and classifier columns that
// read them; an option-A shortcut gets the channel map that carries the
// kept channels to their new places. Every channel space keeps at least
// one channel. In evaluation mode the copy computes the logits of m up to
// float32 rounding. m is not changed.
//
// Build the same network again with models.New(name, classes, rng,
// models.WithWidths(w)) or models.NewLike; models.Spec stores the
// widths in a model file's metadata.
func Compact(m nn.Module) (nn.Module, *models.Widths, error) {
	g, err := Analyze(m, 32, 32)
	if err != nil {
		return nil, nil, err
	}
	return g.compact()
}

// compact is Compact of the analysed model of g.
func (g *Graph) compact() (nn.Module, *models.Widths, error) {
	m := g.model
	w, err := g.widths()
	if err != nil {
		return nil, nil, err
	}
	c, err := models.NewLike(m, w, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return nil, nil, fmt.Errorf("prune.Compact: %w", err)
	}
	gc, err := newGraph(c, 32, 32)
	if err != nil {
		return nil, nil, err
	}
	if len(gc.layers) != len(g.layers) {
		panic(fmt.Sprintf("prune.Compact: the compacted network has %d layers, the original %d", len(gc.layers), len(g.layers)))
	}
	for i, l := range g.layers {
		if gc.layers[i].name != l.name {
			panic(fmt.Sprintf("prune.Compact: layer %d is %s in the compacted network, %s in the original", i, gc.layers[i].name, l.name))
		}
		l.copyKept(gc.layers[i])
	}
	return c, w, nil
}

// keptIndex returns the indices of the kept channels of s.
func (s *space) keptIndex() []int {
	var idx []int
	for c, k := range s.keep {
		if k {
			idx = append(idx, c)
		}
	}
	return idx
}

// newIndex returns the index of each channel of s among the kept ones,
// −1 for removed channels.
func (s *space) newIndex() []int {
	idx := make([]int, s.c)
	n := 0
	for c, k := range s.keep {
		idx[c] = -1
		if k {
			idx[c] = n
			n++
		}
	}
	return idx
}

// widths returns the channel counts of the compacted network.
func (g *Graph) widths() (*models.Widths, error) {
	w, err := models.WidthsOf(g.model)
	if err != nil {
		return nil, err
	}
	byName := map[string]*layer{}
	for _, l := range g.layers {
		byName[l.name] = l
	}
	if w.Features != nil {
		convs := g.layers[:len(g.layers)-1]
		j := 0
		for i, c := range w.Features {
			if c != 0 {
				w.Features[i] = convs[j].out.space.kept()
				j++
			}
		}
		return w, nil
	}
	w.Stem = byName["conv1"].out.space.kept()
	for s := range w.Stages {
		for b := range w.Stages[s] {
			p := fmt.Sprintf("layer%d.%d.", s+1, b)
			c1, c2 := byName[p+"conv1"], byName[p+"conv2"]
			bw := &w.Stages[s][b]
			bw.Inner, bw.Out = c1.out.space.kept(), c2.out.space.kept()
			if bw.Pad == nil {
				continue
			}
			t := c2.out.terms[1]
			src, dst := t.src.space, c2.out.space.newIndex()
			bw.Pad = bw.Pad[:0]
			for _, i := range src.keptIndex() {
				d := t.dst[i]
				if d >= 0 {
					d = dst[d]
				}
				bw.Pad = append(bw.Pad, d)
			}
		}
	}
	return w, nil
}

// copyKept copies the kept part of l's tensors into dst, the same layer
// of the compacted network.
func (l *layer) copyKept(dst *layer) {
	in := l.in.space.keptIndex()
	if l.linear != nil {
		w, dw := l.linear.Weight, dst.linear.Weight
		per := w.Dim(1) / l.in.c
		rows, cols, dcols := w.Dim(0), w.Dim(1), dw.Dim(1)
		for r := range rows {
			for j, i := range in {
				copy(dw.Data[r*dcols+j*per:r*dcols+(j+1)*per], w.Data[r*cols+i*per:r*cols+(i+1)*per])
			}
		}
		if l.linear.Bias != nil {
			copy(dst.linear.Bias.Data, l.linear.Bias.Data)
		}
		return
	}
	out := l.out.space.keptIndex()
	w, dw := l.conv.Weight, dst.conv.Weight
	cin, kk := w.Dim(1), w.Numel()/(w.Dim(0)*w.Dim(1))
	dcin := dw.Dim(1)
	for o2, o := range out {
		for i2, i := range in {
			copy(dw.Data[(o2*dcin+i2)*kk:(o2*dcin+i2+1)*kk], w.Data[(o*cin+i)*kk:(o*cin+i+1)*kk])
		}
	}
	gather := func(d, s []float32) {
		for o2, o := range out {
			d[o2] = s[o]
		}
	}
	if l.conv.Bias != nil {
		gather(dst.conv.Bias.Data, l.conv.Bias.Data)
	}
	gather(dst.bn.Weight.Data, l.bn.Weight.Data)
	gather(dst.bn.Bias.Data, l.bn.Bias.Data)
	gather(dst.bn.RunningMean.Data, l.bn.RunningMean.Data)
	gather(dst.bn.RunningVar.Data, l.bn.RunningVar.Data)
	copy(dst.bn.NumBatchesTracked.Data, l.bn.NumBatchesTracked.Data)
	dst.bn.Momentum, dst.bn.Eps = l.bn.Momentum, l.bn.Eps
}

// FileResult describes a model file compacted by CompactFile.
type FileResult struct {
	// Spec is the compacted network's description, stored in the new
	// file's metadata (with its Widths).
	Spec models.Spec
	// Count is what the analysis of the original network found: its
	// totals are the original network's, the kept numbers the compacted
	// one's.
	Count Count
}

// CompactFile compacts the network stored in the model or training-state
// file src and writes it to the model file dst with its widths in the
// metadata, its sparse and binary tensors compressed
// (checkpoint.SaveCompressedModel: the deployable file), so that nn/infer.Load and checkpoint.LoadModel into
// spec.Build() rebuild it. The network is spec merged with src's metadata
// (fields of spec win), as nn/infer.Load reads it; the other metadata of a
// model file are kept.
func CompactFile(dst, src string, spec models.Spec) (*FileResult, error) {
	f, err := safetensors.ReadFile(src)
	if err != nil {
		return nil, err
	}
	meta, err := models.SpecFromMetadata(f.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	spec = spec.Merge(meta)
	// The description must fit the file's tensors before the network is
	// built (issue 26: metadata must not make a small file allocate a
	// huge network).
	full, err := spec.Complete()
	if err == nil {
		err = full.Validate(f)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	net, err := spec.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if err := checkpoint.LoadWeights(f, net); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	g, err := Analyze(net, 32, 32)
	if err != nil {
		return nil, err
	}
	c, w, err := g.compact()
	if err != nil {
		return nil, err
	}
	spec.Widths = w
	out := map[string]string{}
	if _, checkpointFile := f.Metadata[checkpoint.FormatKey]; !checkpointFile {
		// A training checkpoint's metadata describes the run, not the
		// model file.
		maps.Copy(out, f.Metadata)
	}
	maps.Copy(out, spec.Metadata())
	if err := checkpoint.SaveCompressedModel(dst, c, out); err != nil {
		return nil, err
	}
	return &FileResult{Spec: spec, Count: g.Count()}, nil
}
