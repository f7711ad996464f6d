package serve_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// TestImageOverMemoryBudget: an image whose decoding alone would take more
// than the whole budget is refused from its header with 413.
func TestImageOverMemoryBudget(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MemoryBudget: 1 << 20})
	code, b := post(t, r.url+"/classify", "image/png", encodePNG(t, synthetic(400, 400, 1)))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "memory budget") {
		t.Fatalf("status %d %s, want 413 naming the memory budget", code, b)
	}
	classify(t, r.url+"/classify", "image/png", encodePNG(t, synthetic(100, 100, 1)))
}

// procStatus returns a field of /proc/self/status in bytes.
func procStatus(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// worstPNG is a 2048×2048 PNG of 16-bit RGBA: a small upload (a smooth
// gradient compresses well) whose decoding takes 32 MiB.
func worstPNG(t testing.TB) []byte {
	img := image.NewNRGBA64(image.Rect(0, 0, 2048, 2048))
	for y := range 2048 {
		for x := range 2048 {
			img.SetNRGBA64(x, y, color.NRGBA64{uint16(x * 32), uint16(y * 32), uint16(x ^ y), 0xffff})
		}
	}
	return encodePNG(t, img)
}

// memResult is what the child process of TestAdmissionBoundsPeakMemory
// reports.
type memResult struct {
	Budget, Limit, BaseRSS, PeakRSS int64
	Uploads, UploadBytes            int
	Status                          map[int]int
	Seconds, MaxLatency             float64
}

// TestAdmissionBoundsPeakMemory runs a server in a fresh process with a
// decoding budget of 128 MiB (and the memory limit cmd/serve sets for it)
// and sends it 24 concurrent worst-case uploads (2048×2048 RGBA-16 PNGs,
// 58 MiB each by the budget's estimate). Every upload is answered 200 and
// the process's peak RSS (VmHWM, reset before the uploads) stays within
// the base RSS plus serve.MemoryLimit(budget). Without admission the 24
// decodes alone would hold 768 MiB at once.
func TestAdmissionBoundsPeakMemory(t *testing.T) {
	if os.Getenv("SERVE_MEM_CHILD") != "" {
		memChild(t)
		return
	}
	if testing.Short() || raceEnabled {
		t.Skip("peak-memory test: skipped with -short and -race")
	}
	if _, err := procStatus("VmHWM"); err != nil {
		t.Skipf("no VmHWM: %v", err)
	}
	budgets := []string{strconv.Itoa(128 << 20)}
	if v := os.Getenv("SERVE_MEM_BUDGETS"); v != "" { // e.g. a huge budget, for comparison
		budgets = strings.Split(v, ",")
	}
	for _, budget := range budgets {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdmissionBoundsPeakMemory$")
		cmd.Env = append(os.Environ(), "SERVE_MEM_CHILD="+budget, "GOMEMLIMIT=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		_, line, ok := strings.Cut(string(out), "RESULT ")
		if !ok {
			t.Fatalf("no result from the child:\n%s", out)
		}
		var res memResult
		if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &res); err != nil {
			t.Fatal(err)
		}
		t.Logf("budget %d MiB (memory limit %d MiB): %d concurrent uploads of %d bytes: statuses %v in %.1fs (slowest %.1fs); RSS %d MiB before, peak %d MiB (+%d MiB)",
			res.Budget>>20, res.Limit>>20, res.Uploads, res.UploadBytes, res.Status, res.Seconds, res.MaxLatency, res.BaseRSS>>20, res.PeakRSS>>20, (res.PeakRSS-res.BaseRSS)>>20)
		if res.Status[200] != res.Uploads {
			t.Errorf("statuses %v: want every upload answered 200", res.Status)
		}
		if os.Getenv("SERVE_MEM_BUDGETS") == "" && res.PeakRSS-res.BaseRSS > res.Limit {
			t.Errorf("peak RSS grew by %d MiB, over the memory limit of %d MiB for a budget of %d MiB", (res.PeakRSS-res.BaseRSS)>>20, res.Limit>>20, res.Budget>>20)
		}
	}
}

// memChild is the child process of TestAdmissionBoundsPeakMemory.
func memChild(t *testing.T) {
	uploads := 24
	if v, err := strconv.Atoi(os.Getenv("SERVE_MEM_UPLOADS")); err == nil { // e.g. 256, for the figures
		uploads = v
	}
	budget, err := strconv.ParseInt(os.Getenv("SERVE_MEM_CHILD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	debug.SetMemoryLimit(serve.MemoryLimit(budget)) // as cmd/serve does
	m := tinyModel(t)
	body := worstPNG(t)
	r := start(t, m, serve.Config{MemoryBudget: budget, AdmissionWait: 10 * time.Minute, WriteTimeout: 10 * time.Minute})
	classify(t, r.url+"/classify", "image/png", encodePNG(t, synthetic(40, 40, 1))) // warm up
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil { // resets VmHWM
		t.Fatalf("resetting VmHWM: %v", err)
	}
	base, err := procStatus("VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	res := memResult{Budget: budget, Limit: serve.MemoryLimit(budget), BaseRSS: base, Uploads: uploads, UploadBytes: len(body), Status: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	for range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t1 := time.Now()
			code, _ := post(t, r.url+"/classify", "image/png", body)
			mu.Lock()
			res.Status[code]++
			res.MaxLatency = max(res.MaxLatency, time.Since(t1).Seconds())
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(t0).Seconds()
	if res.PeakRSS, err = procStatus("VmHWM"); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
}

// TestBodiesChargedToBudget: a body is charged to the memory budget as it
// arrives, so a body larger than the room left is refused with 503 while
// it is received; every charge is released when the request ends.
func TestBodiesChargedToBudget(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MemoryBudget: 1 << 20, AdmissionWait: 10 * time.Millisecond})
	code, b := post(t, r.url+"/classify", "application/octet-stream", make([]byte, 2<<20))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "receiving the body") {
		t.Fatalf("2 MiB body with a 1 MiB budget: status %d %s, want 503", code, b)
	}
	// A protocol request is charged twice its body more for parsing.
	body := `{"inputs":[{"name":"image","shape":[1],"datatype":"BYTES","data":["` + strings.Repeat("A", 400<<10) + `"]}]}`
	code, b = do(t, "POST", r.url+"/v2/models/model/infer", body)
	wantV2Error(t, "400 KiB protocol request with a 1 MiB budget", code, b, http.StatusServiceUnavailable, "parsing the request")
	classify(t, r.url+"/classify", "application/octet-stream", rawImage(1))
	samples, _, err := parseExposition(scrape(t, r.url))
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, samples, "proxgen_memory_in_use_bytes"); got != 0 {
		t.Fatalf("%v bytes still charged after the requests", got)
	}
	if got := value(t, samples, "proxgen_admission_refused_total"); got != 2 {
		t.Fatalf("%v refusals counted, want 2", got)
	}
}
