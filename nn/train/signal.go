package train

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// CatchInterrupts returns a context that is cancelled, with the signal as
// its cause, at the first SIGINT or SIGTERM the process receives. It is
// for a program's main function, called once and as early as possible.
//
// The signals stay caught until the process exits, and nothing ever
// restores their default action: a second, third or hundredth signal,
// during the checkpoint save that follows the first or while the program
// exits, changes nothing, so the program always finishes its save and
// exits with its own status (the repository's programs use 130,
// internal/cli.ExitInterrupted) instead of being killed half-way. (signal.NotifyContext's stop function, called before os.Exit,
// re-enables the default action and leaves a window in which a late
// signal kills the process.)
func CatchInterrupts() context.Context {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		s := <-ch
		cancel(fmt.Errorf("%w by signal %v", context.Canceled, s))
		for range ch { // later signals: caught and ignored
		}
	}()
	return ctx
}
