package autograd

import "github.com/proxgen/proxgen/autograd/conv"

// ConvAlgos names the algorithms a test can force on a convolution.
var ConvAlgos = []string{"auto", "im2col", "winograd", "gather", "blocked"}

// WithConvAlgo returns cfg with the convolution algorithm forced to the
// named one of ConvAlgos; an algorithm that does not apply to a layer
// falls back to im2col.
func WithConvAlgo(cfg ConvConfig, name string) ConvConfig {
	for i, n := range ConvAlgos {
		if n == name {
			cfg.Algo = conv.Algo(i)
			return cfg
		}
	}
	panic("unknown convolution algorithm " + name)
}
