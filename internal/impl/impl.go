// Package impl is the registry of the engine's alternative kernel
// implementations: the assembly kernels that stand beside a Go loop and
// compute the same values bit for bit.
//
// A package with such kernels registers each implementation once, at
// initialisation, with a pointer to the flag its dispatch code reads:
//
//	var useAVX2 = cpu.X86.AVX2
//	func init() { impl.Register("kernels", "avx2", &useAVX2) }
//
// and its dispatch runs the kernel only while that flag is true. The flag
// starts as what the CPU supports and is never changed by the product;
// only tests change it, through Select and Reset (or ForEach), to run the
// same inputs through every implementation and through the Go loop
// ("generic") and compare. This mirrors crypto/internal/impl in the
// standard library, and replaces the per-package switches that used to do
// the same job.
package impl

import (
	"slices"
	"strings"
	"sync"
)

// Generic is the name under which ForEach runs the Go loops alone.
const Generic = "generic"

type implementation struct {
	pkg, name string
	available *bool
	supported bool // what the CPU supports: *available at registration
}

var (
	mu       sync.Mutex
	registry []*implementation
)

// Register records the implementation name of package pkg, which runs
// while *available is true. It must be called from an init function, with
// *available already set to whether this CPU supports the implementation.
// A name may be registered only once per package, and "generic" is
// reserved.
func Register(pkg, name string, available *bool) {
	if name == Generic || strings.ContainsAny(name, " /") {
		panic("impl: invalid implementation name " + name)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range registry {
		if r.pkg == pkg && r.name == name {
			panic("impl: " + pkg + "/" + name + " registered twice")
		}
	}
	registry = append(registry, &implementation{pkg: pkg, name: name, available: available, supported: *available})
}

// Packages returns the packages that registered implementations, sorted.
func Packages() []string {
	mu.Lock()
	defer mu.Unlock()
	var pkgs []string
	for _, r := range registry {
		if !slices.Contains(pkgs, r.pkg) {
			pkgs = append(pkgs, r.pkg)
		}
	}
	slices.Sort(pkgs)
	return pkgs
}

// List returns the implementations of pkg, in registration order, and
// whether this CPU supports each.
func List(pkg string) (names []string, supported []bool) {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range registry {
		if r.pkg == pkg {
			names = append(names, r.name)
			supported = append(supported, r.supported)
		}
	}
	return names, supported
}

// Select enables only the implementation name of pkg (Generic: none, so
// the Go loops run) and reports whether the CPU supports it; when it does
// not, nothing changes. For tests only: it changes what every caller in
// the process runs, so tests that use it must not run in parallel.
func Select(pkg, name string) bool {
	mu.Lock()
	defer mu.Unlock()
	if name != Generic {
		found := false
		for _, r := range registry {
			if r.pkg == pkg && r.name == name {
				found = r.supported
			}
		}
		if !found {
			return false
		}
	}
	for _, r := range registry {
		if r.pkg == pkg {
			*r.available = r.name == name
		}
	}
	return true
}

// Reset enables every implementation of pkg that the CPU supports, as at
// start-up.
func Reset(pkg string) {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range registry {
		if r.pkg == pkg {
			*r.available = r.supported
		}
	}
}

// ForEach calls f once with only the Go loops of pkg enabled (name
// Generic) and then once with each supported implementation enabled
// alone, and resets pkg afterwards. Tests use it to check every
// implementation against the Go loops on the same inputs.
func ForEach(pkg string, f func(name string)) {
	defer Reset(pkg)
	names, supported := List(pkg)
	Select(pkg, Generic)
	f(Generic)
	for i, name := range names {
		if supported[i] && Select(pkg, name) {
			f(name)
		}
	}
}
