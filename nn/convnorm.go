package nn

import (
	"fmt"
	"strconv"
)

// ConvNorm is a convolution whose output goes straight into a batch
// normalisation: the convolution's weight and the normalisation's γ and β,
// named by their dotted paths. Output channel c of the pair is exactly
// zero, in training and in evaluation mode, when γ[c] = β[c] = 0 (the
// normalised value is finite and multiplied by zero); zeroing filter c of
// the weight as well lets the channel be removed from the network exactly.
// optim.Couple makes (filter c, γ[c], β[c]) one group of a group
// regularizer so that the three reach zero together.
type ConvNorm struct {
	// Weight is the convolution weight (Cout, Cin, k, k).
	Weight Param
	// Gamma and Beta are the batch normalisation's weight and bias (Cout).
	Gamma, Beta Param
}

// NormPairer is implemented by containers whose forward pass feeds a child
// Conv2d straight into a child BatchNorm2d other than as adjacent layers
// of a Sequential (which ConvNorms finds by itself).
type NormPairer interface {
	// NormPairs returns the child names of each such pair: the
	// convolution, then its batch normalisation.
	NormPairs() [][2]string
}

// ConvNorms returns every Conv2d of m whose output a BatchNorm2d
// normalises directly: adjacent layers of a Sequential and the pairs that
// containers declare through NormPairer, in the order of m's children
// (each container's pairs before its children's). It panics, naming the
// pair, if a declared pair is not a Conv2d and a BatchNorm2d of the same
// number of channels.
func ConvNorms(m Module) []ConvNorm { return appendConvNorms(nil, "", m) }

func appendConvNorms(out []ConvNorm, prefix string, m Module) []ConvNorm {
	c, ok := m.(Container)
	if !ok {
		return out
	}
	children := c.Children()
	var pairs [][2]string
	if s, ok := m.(*Sequential); ok {
		for i := 0; i+1 < len(s.Layers); i++ {
			_, conv := s.Layers[i].(*Conv2d)
			_, bn := s.Layers[i+1].(*BatchNorm2d)
			if conv && bn {
				pairs = append(pairs, [2]string{strconv.Itoa(i), strconv.Itoa(i + 1)})
			}
		}
	}
	if p, ok := m.(NormPairer); ok {
		pairs = append(pairs, p.NormPairs()...)
	}
	find := func(name string) Module {
		for _, ch := range children {
			if ch.Name == name {
				return ch.Module
			}
		}
		return nil
	}
	for _, p := range pairs {
		conv, ok1 := find(p[0]).(*Conv2d)
		bn, ok2 := find(p[1]).(*BatchNorm2d)
		if !ok1 || !ok2 || conv.Weight.Dim(0) != bn.Weight.Numel() {
			panic(fmt.Sprintf("nn.ConvNorms: %s%s and %s%s are not a Conv2d and a BatchNorm2d of as many channels", prefix, p[0], prefix, p[1]))
		}
		out = append(out, ConvNorm{
			Weight: Param{Name: prefix + p[0] + ".weight", T: conv.Weight},
			Gamma:  Param{Name: prefix + p[1] + ".weight", T: bn.Weight},
			Beta:   Param{Name: prefix + p[1] + ".bias", T: bn.Bias},
		})
	}
	for _, ch := range children {
		out = appendConvNorms(out, prefix+ch.Name+".", ch.Module)
	}
	return out
}
