// Package cifarinfo holds the constants of CIFAR-10 that both the data set
// loader (datasets/cifar10) and the model description and inference
// (nn/models, nn/infer) need: the number of classes, their names and the
// normalisation constants of the reference training code. It imports
// nothing, so inference does not depend on the data set package.
package cifarinfo

// NumClasses is the number of CIFAR-10 classes; labels are 0..9.
const NumClasses = 10

// ClassNames are the class names indexed by label, as in batches.meta.txt.
var ClassNames = [NumClasses]string{
	"airplane", "automobile", "bird", "cat", "deer",
	"dog", "frog", "horse", "ship", "truck",
}

// Mean and Std are the per-channel (R, G, B) normalisation constants of
// the reference training code. Callers must not change them.
var (
	Mean = []float32{0.4914, 0.4822, 0.4465}
	Std  = []float32{0.2023, 0.1994, 0.2010}
)
