package main

import (
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/cmd/internal/ptbrun"
)

// The names the tests of the program use for its parts, which live in
// package ptbrun.
var run = ptbrun.Main

type (
	epochRecord = ptbrun.EpochRecord
	summary     = ptbrun.Summary
)

const (
	noTrainNote = ptbrun.NoTrainNote

	exitOK          = experiment.ExitOK
	exitError       = experiment.ExitError
	exitUsage       = experiment.ExitUsage
	exitInterrupted = experiment.ExitInterrupted
)
