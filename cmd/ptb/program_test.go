package main

import (
	"github.com/proxgen/proxgen/cmd/internal/ptbrun"
	"github.com/proxgen/proxgen/internal/cli"
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

	exitOK          = cli.ExitOK
	exitError       = cli.ExitError
	exitUsage       = cli.ExitUsage
	exitInterrupted = cli.ExitInterrupted
)
