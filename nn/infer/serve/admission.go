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
// the memory available to the process — MemTotal of /proc/meminfo, or the
// cgroup's memory limit (memory.max of cgroup v2, memory.limit_in_bytes of
// v1) where that is lower, as in a container — at least 64 MiB and at most
// 16 GiB; 1 GiB where neither can be read.
func DefaultMemoryBudget() int64 {
	avail := memTotal()
	if lim := cgroupLimit(); lim > 0 && (avail <= 0 || lim < avail) {
		avail = lim
	}
	if avail <= 0 {
		return 1 << 30
	}
	return min(max(avail/4, 64<<20), 16<<30)
}

// memTotal returns MemTotal of /proc/meminfo in bytes, or 0.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit returns the memory limit of the process's cgroup in bytes,
// or 0 if there is none or it cannot be read.
func cgroupLimit() int64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && n < 1<<60 { // "max", or v1's huge "unlimited"
			return n
		}
	}
	return 0
}
