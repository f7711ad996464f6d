package main

import (
	"github.com/proxgen/proxgen/cmd/internal/cifarrun"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/internal/cli"
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

	exitOK          = cli.ExitOK
	exitError       = cli.ExitError
	exitUsage       = cli.ExitUsage
	exitInterrupted = cli.ExitInterrupted
)
