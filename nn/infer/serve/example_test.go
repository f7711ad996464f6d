package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
	"github.com/proxgen/proxgen/nn/models"
)

// A Server is an http.Handler: mount it in a mux or an httptest server,
// and Close it after the HTTP server has stopped. (Serve runs it on a
// listener with timeouts and graceful shutdown.)
func ExampleServer() {
	spec := models.Spec{Model: "resnet8", Width: 0.25} // usually infer.Load(path, models.Spec{})
	net, err := spec.Build()
	if err != nil {
		log.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := serve.New(m, serve.Config{MaxBatch: 16})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer srv.Close()
	defer hs.Close()

	raw := make([]byte, 3072) // a raw CIFAR-10 image: R, G and B planes of 32×32
	resp, err := http.Post(hs.URL+"/classify?k=2", "application/octet-stream", bytes.NewReader(raw))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var r serve.Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, len(r.Predictions), "classes")
	// Output: 200 OK 2 classes
}
