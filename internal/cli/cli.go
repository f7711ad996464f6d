// Package cli gives every program of the repository one command-line
// convention: -h prints a one-line description, the usage line and the
// flags with their types, without internal sentinel values as defaults;
// a bad flag prints the error and the usage and exits with ExitUsage;
// data and I/O errors exit with ExitError.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Exit statuses of the programs.
const (
	ExitOK    = 0
	ExitError = 1 // data, files, I/O, a failed run
	ExitUsage = 2 // bad flags
	// ExitInterrupted is the status of a program that stopped on SIGINT
	// or SIGTERM after saving what it had (nn/train.CatchInterrupts):
	// 128 + SIGINT's number, as shells report a Ctrl-C.
	ExitInterrupted = 130
)

// UsageError is an error of the command line (exit status ExitUsage).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with the formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// ExitCode returns the exit status for a program's error: ExitOK for nil
// and flag.ErrHelp (after -h), ExitUsage for a *UsageError, ExitError
// otherwise.
func ExitCode(err error) int {
	var u *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	default:
		return ExitError
	}
}

// NewFlagSet returns a flag set for the program name (as it is invoked,
// for example "bench gemm") that reports its errors to out. Its usage,
// printed for -h and after a bad flag, is
//
//	name: description
//
//	usage: usageLine
//
//	flags:
//	  -flag type
//	    	what it does (default ...)
func NewFlagSet(name, usageLine, description string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "%s: %s\n\nusage: %s\n", name, description, usageLine)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nflags:\n")
			PrintFlags(w, fs)
		}
	}
	return fs
}

// Parse parses args with fs: it returns flag.ErrHelp after -h, a
// *UsageError for a bad flag (whose message and the usage fs has already
// printed) or for arguments left over, and nil otherwise.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil && fs.NArg() > 0:
		return Usagef("unexpected argument %q (all settings are flags)", fs.Arg(0))
	case err == nil, errors.Is(err, flag.ErrHelp):
		return err
	default:
		return &UsageError{err}
	}
}

// Typed is a flag.Value that names the type of its values for the usage
// ("float", "int", "duration", ...).
type Typed interface {
	flag.Value
	Type() string
}

// Defaulted is a flag.Value that says how its default reads in the usage;
// "" shows none (an unset sentinel, explained in the flag's text).
type Defaulted interface {
	flag.Value
	DefaultText() string
}

// PrintFlags prints the flags of fs as flag.PrintDefaults does, with two
// differences: a Typed value names its type instead of "value", and a
// default is shown only when it is not the zero value and, for a
// Defaulted value, not hidden.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  -%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if t, ok := f.Value.(Typed); ok && name == "value" {
			name = t.Type()
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		def := f.DefValue
		if d, ok := f.Value.(Defaulted); ok {
			def = d.DefaultText()
		}
		switch {
		case def == "" || def == "0" || def == "false" || def == "0s":
		case name == "string":
			fmt.Fprintf(&b, " (default %q)", def)
		default:
			fmt.Fprintf(&b, " (default %s)", def)
		}
		fmt.Fprintln(w, b.String())
	})
}

// OptionalFloat is a float flag whose unset value is NaN: it reads "auto"
// and shows no default (the flag's text says what auto means). Values
// must be finite.
type OptionalFloat struct{ P *float64 }

func (f OptionalFloat) String() string {
	if f.P == nil || math.IsNaN(*f.P) {
		return "auto"
	}
	return strconv.FormatFloat(*f.P, 'g', -1, 64)
}

// Set parses a finite number.
func (f OptionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("must be finite")
	}
	*f.P = v
	return nil
}

// Type names the values: float.
func (OptionalFloat) Type() string { return "float" }

// DefaultText shows no default while unset.
func (f OptionalFloat) DefaultText() string {
	if f.P == nil || math.IsNaN(*f.P) {
		return ""
	}
	return f.String()
}

// OptionalInt is an int flag whose value Unset means "not given": the
// usage shows no default for it (the flag's text says what happens).
type OptionalInt struct {
	P     *int
	Unset int
}

func (f OptionalInt) String() string {
	if f.P == nil {
		return ""
	}
	return strconv.Itoa(*f.P)
}

// Set parses an integer.
func (f OptionalInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("not an integer")
	}
	*f.P = int(v)
	return nil
}

// Type names the values: int.
func (OptionalInt) Type() string { return "int" }

// DefaultText shows no default while unset.
func (f OptionalInt) DefaultText() string {
	if f.P == nil || *f.P == f.Unset {
		return ""
	}
	return f.String()
}

// Count writes n and the noun, in the plural unless n is 1 ("1 epoch",
// "2 epochs"). The plural adds "s" or, after s, x, sh or tch, "es".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	for _, end := range []string{"s", "x", "sh", "tch"} {
		if strings.HasSuffix(noun, end) {
			return strconv.Itoa(n) + " " + noun + "es"
		}
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
