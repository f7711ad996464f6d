package proxk

// Kinds of ℓq map with a dedicated implementation.
const (
	KindL0 = iota
	KindL12
	KindL23
	KindL1
	KindNumeric // 0 < q < 1, q ∉ {1/2, 2/3}
)
