// Package experiment holds what training programs share around a
// train.Loop: the training method built from a method name
// (LookupMethod) with its regularized group, λ schedule, hard
// quantisation and ℓ0 hard-concrete gates (Method), the statistics of the
// weights that metrics report (ComputeWeightStats), and the plumbing of a
// run folder (ReadStoredRun, MergeFlags for -resume, CheckNewRun,
// DecodeHistory, SetThreads, the exit statuses).
//
// The programs themselves are library packages below it, so that a sweep
// can check and run them in-process: cifarrun (cmd/cifar) and ptbrun
// (cmd/ptb). A new training program needs a model, its data, a Step and
// an EndEpoch; the package example is one in about a hundred lines.
package experiment
