// Package cifarinfo holds the constants of CIFAR-10 that both the data set
// loader (datasets/cifar10) and the model description and inference
// (nn/models, nn/infer) need: the number of classes, their names and the
// normalisation constants of the reference training code. It imports
// nothing, so inference does not depend on the data set package.
package cifarinfo

import (
	"fmt"
	"math"
)

// The layout of an image and of a record of the binary files.
const (
	Height     = 32                        // image height in pixels
	Width      = 32                        // image width in pixels
	Channels   = 3                         // colour planes, in the order R, G, B
	ImageSize  = Channels * Height * Width // bytes (and float32 values) per image: 3072
	RecordSize = 1 + ImageSize             // bytes per record in a .bin file: 3073
	planeSize  = Height * Width            // bytes per colour plane
)

// NumClasses is the number of CIFAR-10 classes; labels are 0..9.
const NumClasses = 10

// classNames are the class names indexed by label, as in batches.meta.txt.
var classNames = [NumClasses]string{
	"airplane", "automobile", "bird", "cat", "deer",
	"dog", "frog", "horse", "ship", "truck",
}

// ClassNames returns a new slice of the class names indexed by label, as
// in batches.meta.txt.
func ClassNames() []string { return append([]string(nil), classNames[:]...) }

// mean and std are the per-channel (R, G, B) normalisation constants of
// the reference training code.
var (
	mean = [Channels]float32{0.4914, 0.4822, 0.4465}
	std  = [Channels]float32{0.2023, 0.1994, 0.2010}
)

// Mean returns a new slice of the per-channel (R, G, B) means of the
// reference training code's normalisation.
func Mean() []float32 { return append([]float32(nil), mean[:]...) }

// Std returns a new slice of the per-channel (R, G, B) standard deviations
// of the reference training code's normalisation.
func Std() []float32 { return append([]float32(nil), std[:]...) }

// Normalizer turns raw 8-bit pixels into the normalised float32 values the
// networks see: (v/255 - Mean[c]) / Std[c], computed in float32 arithmetic
// exactly as torchvision's ToTensor and Normalize compute it. The loader
// uses it for every image, and inference code uses it to preprocess
// images exactly as in training. A Normalizer is immutable and safe for
// concurrent use.
type Normalizer struct {
	lut [Channels][256]float32 // lut[c][v] = (v/255 - mean[c]) / std[c]
}

// CheckNormalization reports whether mean and std can normalise images:
// three finite means, and three standard deviations that are finite,
// positive and normal (not zero, not subnormal), so that their reciprocals
// are finite. The error names the offending value as "mean[i]" or "std[i]".
func CheckNormalization(mean, std []float32) error {
	if len(mean) != Channels {
		return fmt.Errorf("mean: %d values, want %d (R, G, B)", len(mean), Channels)
	}
	if len(std) != Channels {
		return fmt.Errorf("std: %d values, want %d (R, G, B)", len(std), Channels)
	}
	for c := range Channels {
		if m := float64(mean[c]); math.IsNaN(m) || math.IsInf(m, 0) {
			return fmt.Errorf("mean[%d] = %g: want a finite value", c, mean[c])
		}
		if s := float64(std[c]); math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) < minNormal32 {
			return fmt.Errorf("std[%d] = %g: want a finite, normal, nonzero value", c, std[c])
		} else if s < 0 {
			return fmt.Errorf("std[%d] = %g: want a positive value", c, std[c])
		}
	}
	return nil
}

// minNormal32 is the smallest normal float32.
const minNormal32 = 0x1p-126

// NewNormalizer returns the normaliser for the per-channel (R, G, B)
// constants mean and std, which CheckNormalization must accept.
func NewNormalizer(mean, std []float32) (*Normalizer, error) {
	if err := CheckNormalization(mean, std); err != nil {
		return nil, fmt.Errorf("cifar10: %w", err)
	}
	n := &Normalizer{}
	for c := range Channels {
		for v := range 256 {
			x := float32(v) / 255
			x = float32(x - mean[c])
			n.lut[c][v] = x / std[c]
		}
	}
	return n, nil
}

// Value returns the normalised value of pixel value v in channel c.
func (n *Normalizer) Value(c int, v uint8) float32 { return n.lut[c][v] }

// Normalize writes the normalised image of img, a raw image in the layout
// of a record without its label byte (ImageSize bytes: the R, G and B
// planes of 32×32 pixels, rows top to bottom), into dst (ImageSize
// values, NCHW order). It panics if either length is wrong.
func (n *Normalizer) Normalize(dst []float32, img []uint8) {
	if len(dst) != ImageSize || len(img) != ImageSize {
		panic(fmt.Sprintf("cifar10.Normalizer.Normalize: dst has %d values and img %d bytes, want %d each", len(dst), len(img), ImageSize))
	}
	for c := range Channels {
		lut := &n.lut[c]
		out := dst[c*planeSize : (c+1)*planeSize]
		for i, v := range img[c*planeSize : (c+1)*planeSize] {
			out[i] = lut[v]
		}
	}
}

// Table returns the 256 normalised values of channel c, indexed by the
// pixel value. The caller must not change them.
func (n *Normalizer) Table(c int) *[256]float32 { return &n.lut[c] }
