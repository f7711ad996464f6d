package pretrained_test

import (
	"fmt"
	"image"
	"image/color"
	"log"

	"github.com/proxgen/proxgen/nn/pretrained"
)

// Open the shipped sparse ResNet-20 and classify an image (here a drawn
// one; any decoded PNG or JPEG of any size works the same way).
func ExampleOpen() {
	m, err := pretrained.Open(pretrained.Default)
	if err != nil {
		log.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			c := color.RGBA{R: 90, G: 140, B: 220, A: 255} // sky
			if y > 30 {
				c = color.RGBA{R: 40, G: 110, B: 50, A: 255} // grass
			}
			img.SetRGBA(x, y, c)
		}
	}
	top := m.Predict([]image.Image{img}, 1)[0][0]
	fmt.Printf("%s %.2f\n", top.Name, top.Prob)
	// Output: airplane 0.34
}
