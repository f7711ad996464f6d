// Package models builds the networks of the ProxGen experiments with the
// layer structure, initialisation and parameter names of their PyTorch
// reference implementations, so that nn.StateDict of a model has exactly
// the keys, shapes and order of the reference model's state_dict(). They
// are the networks of Section 4 and Appendix B of the paper
// (arXiv:2007.07484): VGG-16 and ResNet-34 trained sparse on CIFAR-10,
// ResNet-20 to -56 quantised with the revised ProxQuant, and the one-layer
// LSTM language model on Penn Treebank.
//
// # CIFAR-10 classifiers (New)
//
// "vgg16" is VGG('VGG16') of kuangliu/pytorch-cifar (14,728,266 parameters
// for 10 classes). Configuration entry i of
// 64,64,M,128,128,M,256,256,256,M,512,512,512,M,512,512,512,M becomes
// Sequential layers Conv2d(3×3, padding 1, bias), BatchNorm2d, ReLU or a
// single MaxPool2d(2, 2), followed by AvgPool2d(1, 1):
//
//	features.0.weight  (64, 3, 3, 3)   first conv
//	features.0.bias    (64)
//	features.1.weight, .bias, .running_mean, .running_var, .num_batches_tracked
//	                                   its batch norm (features.2 is the ReLU)
//	features.3.*                       second conv, and so on; M entries take
//	                                   one index and have no tensors
//	classifier.weight  (10, 512), classifier.bias (10)
//
// "resnet20", "resnet32", "resnet44" and "resnet56" are resnetN() of
// akamaster/pytorch_resnet_cifar10 (269,722 and 853,018 parameters for
// ResNet-20 and -56 with option A): a 3×3 stem of 16 channels, three stages
// of n = (depth−2)/6 BasicBlocks of widths 16, 32, 64, average pooling over
// the final 8×8 map and a linear layer. Conv and linear weights are drawn
// by kaiming_normal_ (N(0, 2/fan_in)); linear bias and batch norm keep
// PyTorch's defaults. Option A shortcuts (the default) have no tensors;
// WithShortcut(ShortcutB) gives the 1×1 conv + batch norm shortcuts that
// the ProxQuant reference code uses.
//
// "resnet34" (and "resnet18") is ResNet34() of kuangliu/pytorch-cifar
// (21,282,122 parameters): a 3×3 stride-1 stem of 64 channels, no max
// pooling, stages of [3,4,6,3] BasicBlocks of widths 64, 128, 256, 512,
// option-B shortcuts wherever the shape changes, AvgPool2d(4) and a linear
// layer, with PyTorch's default initialisation. Both ResNet families use
// the names
//
//	conv1.weight                       stem conv (no bias)
//	bn1.weight, bn1.bias, bn1.running_mean, bn1.running_var, bn1.num_batches_tracked
//	layer<s>.<b>.conv1.weight          stage s = 1.., block b = 0..
//	layer<s>.<b>.bn1.*                 batch norm tensors as above
//	layer<s>.<b>.conv2.weight
//	layer<s>.<b>.bn2.*
//	layer<s>.<b>.shortcut.0.weight     option B only: 1×1 conv (no bias)
//	layer<s>.<b>.shortcut.1.*          option B only: its batch norm
//	linear.weight, linear.bias
//
// # Per-layer widths
//
// WithWidths builds any of these networks with its own channel count per
// layer (Widths: the VGG configuration, or a ResNet's stem and every
// block's inner and output channels, with the channel map of each option-A
// shortcut), as compaction by package nn/prune leaves them; the parameter
// names stay the reference ones. WidthsOf reads the widths of a network and
// NewLike builds another of the same kind with new widths.
//
// # Layer graph
//
// NewGraph describes any of these networks, and networks made of package
// nn's layers, as a Graph: its operations in running order (convolution,
// batch normalisation, ReLU, residual add, pooling, option-A channel
// selection, flatten, linear, embedding, LSTM), each with its inputs,
// output shape, attributes and the layer holding its tensors, named by
// their state_dict prefix. nn/onnx, nn/infer and nn/prune read a
// network's structure from it only.
//
// # PTB language model (NewLanguageModel)
//
// LanguageModel is RNNModel("LSTM", ntoken, ninp, nhid, nlayers, dropout) of
// PyTorch's word_language_model example, without weight tying:
//
//	encoder.weight                     (vocab, emb)
//	rnn.weight_ih_l<l>                 (4·hidden, emb or hidden), gates i, f, g, o
//	rnn.weight_hh_l<l>                 (4·hidden, hidden)
//	rnn.bias_ih_l<l>, rnn.bias_hh_l<l> (4·hidden)
//	decoder.weight                     (vocab, hidden)
//	decoder.bias                       (vocab)
//
// num_batches_tracked is an int64 tensor of shape () in PyTorch; here it is
// a one-element float32 tensor whose nn.Param has Int64 set.
package models
