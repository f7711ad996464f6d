//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/infer/serve"
)

// TestSIGTERMDrains runs the program as a child process (this test binary
// with SERVE_TEST_MAIN set calls main), holds a request in flight, sends
// SIGTERM and checks that the request is still answered and the program
// exits 0.
func TestSIGTERMDrains(t *testing.T) {
	if os.Getenv("SERVE_TEST_MAIN") == "1" {
		os.Args = append([]string{"serve"}, strings.Fields(os.Getenv("SERVE_TEST_ARGS"))...)
		main()
		return
	}
	path := modelFile(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGTERMDrains$")
	cmd.Env = append(os.Environ(), "SERVE_TEST_MAIN=1", "SERVE_TEST_ARGS=-model "+path+" -addr 127.0.0.1:0 -threads 1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`listening on http://([0-9.:]+)`)
	var addr string
	var log strings.Builder
	for addr == "" && lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no address in the log:\n%s", log.String())
	}
	rest := make(chan string, 1)
	go func() { // the rest of the log
		b, _ := io.ReadAll(stderr)
		rest <- string(b)
	}()

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /classify?k=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", cifar10.ImageSize)
	c.Write(make([]byte, 100))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics.json")
		if err != nil {
			t.Fatal(err)
		}
		var m serve.Metrics
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err == nil && m.Reading == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request is not in flight: %+v %v", m, err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the shutdown begin
	if _, err := c.Write(make([]byte, cifar10.ImageSize-100)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request in flight at SIGTERM: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request in flight at SIGTERM: status %d", resp.StatusCode)
	}
	tail := <-rest // read before Wait closes the pipe
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, tail)
	}
	if !strings.Contains(tail, "shut down") {
		t.Fatalf("log after SIGTERM:\n%s", tail)
	}
}
