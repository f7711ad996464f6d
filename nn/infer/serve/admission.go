package serve

import (
	"bufio"
	"context"
	"image"
	"image/color"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// budget is a counting semaphore of bytes: the memory that the images
// being decoded and preprocessed may take together.
type budget struct {
	mu   sync.Mutex
	cap  int64
	used int64
	wake chan struct{} // closed and replaced at every release
}

func newBudget(n int64) *budget { return &budget{cap: n, wake: make(chan struct{})} }

// acquire charges n bytes, waiting up to wait for room; false if there
// was none in time (or ctx ended).
func (b *budget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	var timer *time.Timer
	for {
		b.mu.Lock()
		if b.used+n <= b.cap {
			b.used += n
			b.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		wake := b.wake
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// inUse returns the bytes charged now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// decodeCost estimates from an image's header the bytes that decoding it
// and preprocessing it take at most: the decoded image (by the decoder's
// pixel layout for the colour model; a JPEG is charged as progressive,
// whose decoder also holds every DCT coefficient as an int32), the RGB copy
// that preprocessing makes (3 bytes per pixel) and resampling buffers no
// larger than that copy, plus 64 KiB of decoder state.
func decodeCost(kind int, cfg image.Config) int64 {
	bpp := int64(4)
	switch m := cfg.ColorModel; m {
	case color.GrayModel:
		bpp = 1
	case color.Gray16Model:
		bpp = 2
	case color.RGBA64Model, color.NRGBA64Model:
		bpp = 8
	case color.YCbCrModel:
		bpp = 3
	case color.CMYKModel:
		bpp = 4
	default:
		if _, ok := m.(color.Palette); ok {
			bpp = 1
		}
	}
	if kind == kindJPEG {
		bpp += 4 * bpp // progressive: one int32 coefficient per sample
	}
	return int64(cfg.Width)*int64(cfg.Height)*(bpp+6) + 64<<10
}

// MemoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit) that
// cmd/serve sets for a decoding budget: the budget plus 256 MiB for the
// models, request bodies and buffers, so that the collector reclaims the
// memory of decoded images before the heap outgrows the budget by much.
func MemoryLimit(budget int64) int64 { return budget + 256<<20 }

// DefaultMemoryBudget is the default Config.MemoryBudget: a quarter of
// the machine's memory (MemTotal of /proc/meminfo), at least 64 MiB and at
// most 16 GiB; 1 GiB where /proc/meminfo cannot be read.
func DefaultMemoryBudget() int64 {
	const fallback = 1 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return fallback
			}
			return min(max(kb<<10/4, 64<<20), 16<<30)
		}
	}
	return fallback
}
