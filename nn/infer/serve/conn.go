package serve

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strconv"
)

// jsonErrorListener wraps the connections of a listener so that the
// answers net/http writes by itself, before any handler runs (431 for a
// request line and header over MaxHeaderBytes, 400 for a malformed request
// line or header, a TLS handshake on this plain port included, 501 for an
// unsupported transfer encoding), are the JSON error form
// {"error":"...","status":N} like every other error of the server.
//
// net/http writes those answers straight to the connection, in one Write,
// as "HTTP/1.1 <code> <text>" with Content-Type text/plain and
// Connection: close; answers of handlers are never text/plain here (every
// handler of this package answers JSON or the Prometheus text with its
// version parameter), so the rewrite cannot touch them.
type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

// cannedError matches an answer net/http writes by itself.
var cannedError = regexp.MustCompile(`\AHTTP/1\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r]*)\z`)

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("HTTP/1.1 ")) && len(p) < 1024 {
		if m := cannedError.FindSubmatch(p); m != nil {
			status, _ := strconv.Atoi(string(m[1]))
			body, _ := json.Marshal(ErrorResponse{Error: "HTTP: " + string(m[2]), Status: status})
			body = append(body, '\n')
			out := "HTTP/1.1 " + string(m[1]) + " " + http.StatusText(status) + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
				strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
			if _, err := c.Conn.Write([]byte(out)); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}
