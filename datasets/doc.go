// Package datasets groups the data sets used by proxgen's experiments, the
// ones of Section 4 and Appendix B of the ProxGen paper (arXiv:2007.07484):
// CIFAR-10 for the sparse and quantised image classifiers and Penn Treebank
// for the quantised LSTM language model. It holds no code itself.
//
// The sub-packages do not depend on the autograd engine: they hand out plain
// Go slices (float32 images in NCHW order, int labels or token ids) that a
// training program wraps with autograd.FromSlice.
//
//   - datasets/cifar10 reads (and can download) CIFAR-10 in its official
//     binary layout and serves shuffled, augmented, normalised mini-batches
//     prepared by a background goroutine.
//   - datasets/ptb reads the word-level Penn Treebank text files, builds a
//     vocabulary and cuts token streams into BPTT batches the way PyTorch's
//     word_language_model example does.
package datasets
