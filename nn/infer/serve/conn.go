package serve

import (
	"bytes"
	"encoding/json"
	"errors"
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

type jsonErrorConn struct {
	net.Conn
	started bool // the first bytes were read
}

// errTLS ends a connection that began with a TLS handshake.
var errTLS = errors.New("serve: a TLS handshake on a plain HTTP port")

// Read answers a connection whose first byte is a TLS handshake record
// (0x16, which no HTTP method starts with) at once with a JSON 400 and
// ends it; net/http would otherwise wait for a line end until
// ReadHeaderTimeout.
func (c *jsonErrorConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.started && n > 0 {
		c.started = true
		if p[0] == 0x16 {
			c.Conn.Write(jsonAnswer(http.StatusBadRequest, "the client sent a TLS handshake to this plain HTTP port: use http://"))
			return 0, errTLS
		}
	}
	return n, err
}

// jsonAnswer is a whole HTTP/1.1 answer with the JSON error form, closing
// the connection.
func jsonAnswer(status int, msg string) []byte {
	body, _ := json.Marshal(ErrorResponse{Error: msg, Status: status})
	body = append(body, '\n')
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// cannedError matches an answer net/http writes by itself.
var cannedError = regexp.MustCompile(`\AHTTP/1\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r]*)\z`)

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("HTTP/1.1 ")) && len(p) < 1024 {
		if m := cannedError.FindSubmatch(p); m != nil {
			status, _ := strconv.Atoi(string(m[1]))
			if _, err := c.Conn.Write(jsonAnswer(status, "HTTP: "+string(m[2]))); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}
