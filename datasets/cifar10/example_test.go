package cifar10_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/datasets/cifar10"
)

// writeTiny writes a CIFAR-10 binary file of n records (one label byte,
// then 3072 pixel bytes: the R, G and B planes) whose image i is uniformly
// 10·i in every channel, with label i mod 10.
func writeTiny(path string, n int) error {
	var buf []byte
	for i := range n {
		buf = append(buf, byte(i%cifar10.NumClasses))
		for range cifar10.ImageSize {
			buf = append(buf, byte(10*i))
		}
	}
	return os.WriteFile(path, buf, 0o644)
}

// Example reads a tiny data set written to a temporary folder in the
// official binary layout and walks it in shuffled, normalised mini-batches.
func Example() {
	dir, err := os.MkdirTemp("", "cifar10-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, cifar10.TestFile)
	if err := writeTiny(path, 5); err != nil {
		log.Fatal(err)
	}

	split, err := cifar10.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d images, the first labelled %q\n", split.Len(), cifar10.ClassNames()[split.Labels[0]])

	// Pixels are mapped to (p/255 − mean)/std per channel; mean 0.5 and
	// std 0.5 map 0..255 to −1..1.
	half := []float32{0.5, 0.5, 0.5}
	l := cifar10.NewLoader(split, cifar10.LoaderConfig{BatchSize: 2, Shuffle: true, Seed: 1, Mean: half, Std: half})
	defer l.Close()
	for {
		b, ok := l.Next()
		if !ok {
			break
		}
		fmt.Printf("batch of %d: images %v, labels %v, first value %.4f, %d values\n", b.N, b.Indices, b.Y, b.X[0], len(b.X))
	}
	// Output:
	// 5 images, the first labelled "airplane"
	// batch of 2: images [4 1], labels [4 1], first value -0.6863, 6144 values
	// batch of 2: images [2 3], labels [2 3], first value -0.8431, 6144 values
	// batch of 1: images [0], labels [0], first value -1.0000, 3072 values
}
