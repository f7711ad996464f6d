package infer

// ZeroWeights is zeroWeights, for the tests of package infer_test.
var ZeroWeights = zeroWeights
