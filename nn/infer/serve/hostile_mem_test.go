package serve_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// hostileBodies are the audit's protocol requests of issue 35 (scaled to
// the server's MaxBodyBytes): 64 images with an outputs array of
// "probabilities" repeated to the limit (before: >3 GB of RSS), and an
// inputs array of empty objects (before: 623 MB for one, 1156 MB for six).
func hostileBodies(limit int) map[string][]byte {
	fill := func(head, elem, tail string) []byte {
		n := (limit - len(head) - len(tail)) / (len(elem) + 1)
		return []byte(head + strings.Repeat(elem+",", n-1) + elem + tail)
	}
	images := `{"inputs":[{"name":"input","shape":[64,3,32,32],"datatype":"FP32","data":[` + strings.Repeat("0,", 64*3072-1) + `0]}],"outputs":[`
	return map[string][]byte{
		"outputs": fill(images, `{"name":"probabilities"}`, `]}`),
		"inputs":  fill(`{"inputs":[`, `{}`, `]}`),
	}
}

// TestHostileRequestsPeakMemory runs a server with a memory budget of
// 128 MiB in a fresh process and sends it six of each of the audit's
// hostile requests of 8 MiB at once: every one is answered (400, or 503
// when the budget is full), and the peak RSS (VmHWM, reset after the
// bodies are built) grows by less than the budget + 64 MiB (issue 35's
// target).
func TestHostileRequestsPeakMemory(t *testing.T) {
	if os.Getenv("SERVE_HOSTILE_CHILD") != "" {
		hostileChild(t)
		return
	}
	if testing.Short() || raceEnabled {
		t.Skip("peak-memory test: skipped with -short and -race")
	}
	if _, err := procStatus("VmHWM"); err != nil {
		t.Skipf("no VmHWM: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileRequestsPeakMemory$")
	cmd.Env = append(os.Environ(), "SERVE_HOSTILE_CHILD=1", "GOMEMLIMIT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, line, ok := strings.Cut(string(out), "RESULT ")
	if !ok {
		t.Fatalf("no result from the child:\n%s", out)
	}
	var res struct {
		Budget, BaseRSS, PeakRSS int64
		Status                   map[string]map[int]int
	}
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("budget %d MiB: statuses %v; RSS %d MiB before, peak %d MiB (+%d MiB)", res.Budget>>20, res.Status, res.BaseRSS>>20, res.PeakRSS>>20, (res.PeakRSS-res.BaseRSS)>>20)
	for name, st := range res.Status {
		if st[400]+st[503] != 6 {
			t.Errorf("%s: statuses %v, want six answered 400 or 503", name, st)
		}
	}
	if grown := res.PeakRSS - res.BaseRSS; grown > res.Budget+64<<20 {
		t.Errorf("peak RSS grew by %d MiB, over the budget of %d MiB + 64 MiB", grown>>20, res.Budget>>20)
	}
}

func hostileChild(t *testing.T) {
	const budget = 128 << 20
	debug.SetMemoryLimit(serve.MemoryLimit(budget)) // as cmd/serve does
	m := tinyModel(t)
	// The bodies' arrival is not under test: on a loaded machine twelve
	// 8 MiB bodies sent at once can fall below the default MinBodyRate
	// and be cut off with 408 before the memory they would cost is.
	r := start(t, m, serve.Config{MemoryBudget: budget, AdmissionWait: 5 * time.Second, BodyTimeout: time.Minute, MinBodyRate: -1})
	bodies := hostileBodies(int(r.srv.Config().MaxBodyBytes))
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting VmHWM: %v", err)
	}
	base, err := procStatus("VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, body := range bodies {
		status[name] = map[int]int{}
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _ := post(t, r.url+"/v2/models/model/infer", "application/json", body)
				mu.Lock()
				status[name][code]++
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	peak, err := procStatus("VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"Budget": budget, "BaseRSS": base, "PeakRSS": peak, "Status": status})
	fmt.Printf("RESULT %s\n", b)
}
