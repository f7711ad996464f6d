package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if !b.acquire(ctx, 100, 0) {
		t.Fatal("the whole budget was refused")
	}
	t0 := time.Now()
	if b.acquire(ctx, 1, 20*time.Millisecond) || time.Since(t0) < 20*time.Millisecond {
		t.Fatal("a full budget admitted more, or did not wait")
	}
	got := make(chan bool)
	go func() { got <- b.acquire(ctx, 50, 10*time.Second) }()
	time.Sleep(10 * time.Millisecond)
	b.release(50)
	if !<-got || b.inUse() != 100 {
		t.Fatalf("the waiter was not admitted after a release: in use %d", b.inUse())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if b.acquire(cctx, 50, time.Minute) {
		t.Fatal("admitted past a cancelled context")
	}
}

func TestDecodeCost(t *testing.T) {
	cfg := func(m color.Model) image.Config { return image.Config{ColorModel: m, Width: 1000, Height: 1000} }
	for _, c := range []struct {
		kind int
		cfg  image.Config
		bpp  int64
	}{
		{kindPNG, cfg(color.GrayModel), 1},
		{kindPNG, cfg(color.Gray16Model), 2},
		{kindPNG, cfg(color.RGBAModel), 4},
		{kindPNG, cfg(color.NRGBA64Model), 8},
		{kindPNG, cfg(color.Palette{color.Black}), 1},
		{kindJPEG, cfg(color.YCbCrModel), 15},
		{kindJPEG, cfg(color.CMYKModel), 20},
	} {
		if got, want := decodeCost(c.kind, c.cfg), 1000*1000*(c.bpp+6)+64<<10; got != want {
			t.Errorf("%T: cost %d, want %d", c.cfg.ColorModel, got, want)
		}
	}
}

// TestAdmissionRefusesWhenFull fills the decoding budget: an image then
// waits AdmissionWait and gets 503 with Retry-After, counted; once the
// budget has room it is classified.
func TestAdmissionRefusesWhenFull(t *testing.T) {
	spec := models.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(m, Config{MemoryBudget: 8 << 20, AdmissionWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var img bytes.Buffer
	png.Encode(&img, image.NewGray(image.Rect(0, 0, 64, 64)))
	send := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/classify", bytes.NewReader(img.Bytes()))
		req.Header.Set("Content-Type", "image/png")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w
	}
	s.budget.acquire(context.Background(), 8<<20, 0)
	w := send()
	var e ErrorResponse
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Status != 503 {
		t.Fatalf("status %d, Retry-After %q, body %s; want 503", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if s.Metrics().AdmissionRefused != 1 {
		t.Fatalf("metrics %+v", s.Metrics())
	}
	s.budget.release(8 << 20)
	if w := send(); w.Code != http.StatusOK {
		t.Fatalf("with room: status %d %s", w.Code, w.Body)
	}
	if s.budget.inUse() != 0 {
		t.Fatalf("%d bytes still charged", s.budget.inUse())
	}
}

func TestDefaultMemoryBudget(t *testing.T) {
	b := DefaultMemoryBudget()
	if b < 64<<20 || b > 16<<30 {
		t.Fatalf("default budget %d outside 64 MiB..16 GiB", b)
	}
	if mt := memTotal(); mt > 0 && b > max(mt/4, 64<<20) {
		t.Fatalf("default budget %d over a quarter of MemTotal %d", b, mt)
	}
	if lim := cgroupLimit(); lim > 0 && b > max(lim/4, 64<<20) {
		t.Fatalf("default budget %d over a quarter of the cgroup limit %d", b, lim)
	}
	t.Logf("default budget %d MiB (MemTotal %d MiB, cgroup limit %d MiB)", b>>20, memTotal()>>20, cgroupLimit()>>20)
}
