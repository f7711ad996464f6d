package schedule_test

import (
	"fmt"

	"github.com/proxgen/proxgen/optim/schedule"
)

// ExampleWarmup builds the schedule of a common CIFAR recipe, a linear
// warm-up over 5 updates followed by cosine annealing to 1e-3 over the
// remaining 15 (PyTorch's SequentialLR of LinearLR and
// CosineAnnealingLR), and prints the step size of some updates.
func ExampleWarmup() {
	s := schedule.Warmup{Steps: 5, StartFactor: 0.1, Then: schedule.Cosine{T: 15, Min: 1e-3}}
	for _, t := range []int{1, 3, 5, 6, 10, 15, 20, 21} {
		fmt.Printf("update %2d: %.5f\n", t, s.Rate(0.1, t))
	}
	// Output:
	// update  1: 0.01000
	// update  3: 0.04600
	// update  5: 0.08200
	// update  6: 0.10000
	// update 10: 0.08362
	// update 15: 0.03520
	// update 20: 0.00208
	// update 21: 0.00100
}

// ExampleOneCycle prints the step sizes of the one-cycle policy over 10
// updates with a peak of 0.1 (PyTorch's OneCycleLR defaults).
func ExampleOneCycle() {
	s := schedule.NewOneCycle(10)
	for t := 1; t <= 10; t++ {
		fmt.Printf("update %2d: %.5f\n", t, s.Rate(0.1, t))
	}
	// Output:
	// update  1: 0.00400
	// update  2: 0.05200
	// update  3: 0.10000
	// update  4: 0.09505
	// update  5: 0.08117
	// update  6: 0.06113
	// update  7: 0.03887
	// update  8: 0.01883
	// update  9: 0.00495
	// update 10: 0.00000
}

// ExampleParse turns a -schedule flag value into a schedule for a
// run of 30 epochs of 100 updates.
func ExampleParse() {
	sp, err := schedule.Parse("warmup:2:0.1+cosine:0.0001")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := sp.Build(100, 30)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%#v\n", s)
	// Output:
	// schedule.Warmup{Steps:200, StartFactor:0.1, Then:schedule.Cosine{T:2800, Min:0.0001}}
}
