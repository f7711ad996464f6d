package infer_test

import (
	"fmt"
	"image"
	"log"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

func Example() {
	// A model file as cmd/cifar writes it (here a small untrained
	// ResNet-8): the weights plus the Spec in the file's metadata.
	dir, err := os.MkdirTemp("", "infer-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	spec := models.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "model.safetensors")
	if err := checkpoint.SaveModel(path, net, spec.Metadata()); err != nil {
		log.Fatal(err)
	}

	// The service: load once, then predict from any goroutine.
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		log.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 64, 48)) // e.g. from image.Decode: PNG or JPEG, any size
	top := m.Predict([]image.Image{img}, 3)[0]
	fmt.Println(m.Spec().Model, "with", len(m.Sparsity().SparseLayers()), "sparse layers") // fmt.Println(m) also names each convolution's algorithm
	fmt.Println(len(top), "classes, most probable first:", top[0].Prob >= top[1].Prob && top[1].Prob >= top[2].Prob)
	// Output:
	// resnet8 with 0 sparse layers
	// 3 classes, most probable first: true
}
