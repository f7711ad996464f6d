package main

import (
	"github.com/proxgen/proxgen/cmd/internal/cifarrun"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
)

// The names the tests of the program use for its parts, which live in
// package cifarrun.
var (
	run        = cifarrun.Main
	optimizers = experiment.MethodNames()
)

type (
	epochRecord = cifarrun.EpochRecord
	summary     = cifarrun.Summary
	evalResult  = cifarrun.EvalResult
)

const (
	metricsFile = cifarrun.MetricsFile
	curvesFile  = cifarrun.CurvesFile
	summaryFile = cifarrun.SummaryFile

	exitOK          = experiment.ExitOK
	exitError       = experiment.ExitError
	exitUsage       = experiment.ExitUsage
	exitInterrupted = experiment.ExitInterrupted
)
