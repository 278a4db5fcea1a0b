package api

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The two ways in, and why a client trusts what answers (see the package
// comment): the Unix socket in the home, which only the home's owner can
// have created, and TCP on loopback, where the daemon first proves it
// holds the token.

// clearSocket makes way for the daemon's socket at path: a socket left
// there by a daemon that did not stop cleanly (nothing accepts on it) is
// removed; one that answers means another daemon runs for this home, and
// is an error, as is a path too long for a socket (errSocketPathTooLong).
// It runs before the new token is written, so a second daemon refused here
// leaves the first one's token alone.
func clearSocket(path string) error {
	if len(path) > maxSocketPath-16 { // the private directory's name is longer by up to 16 bytes
		return fmt.Errorf("%w: %s is %d bytes, over %d", errSocketPathTooLong, path, len(path), maxSocketPath-16)
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("checking the control socket: %w", err)
	case !isSocket(st):
		return fmt.Errorf("%s exists and is not a socket: remove it (the daemon makes its control socket there)", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: something answers on %s (stop that daemon first)", errDaemonRunning, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checking the control socket %s: %w", path, err)
	}
	// Nothing listens: left by a daemon that did not stop cleanly.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing a stale control socket: %w", err)
	}
	return nil
}

// listenSocket listens on the Unix socket path (cleared by clearSocket)
// with mode 0600. The socket is made in a private directory, given its
// mode and only then renamed into place, so nobody can connect to it
// while it is still open to others.
func listenSocket(path string) (*net.UnixListener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".s") // mode 0700
	if err != nil {
		return nil, fmt.Errorf("creating the control socket: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("creating the control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // it will not be at tmp; Server.Close removes it
	if err := os.Chmod(tmp, 0o600); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("creating the control socket: %w", err)
	}
	return ln, nil
}

// viaSocket marks a request's context when it came over the Unix socket.
type viaSocket struct{}

// connContext marks a connection on the Unix socket, and notes a TCP
// connection's addresses for the owner check (peeruid.go).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if _, ok := c.(*net.UnixConn); ok {
		return context.WithValue(ctx, viaSocket{}, true)
	}
	return withConnOwner(ctx, c)
}

// The hello exchange: before a client sends its token over TCP, it sends
//
//	GET /v1/hello?nonce=<64 hex digits, fresh random>
//
// without a token, on the connection it will use, and the daemon answers
// {"proof": hex(HMAC-SHA256(token, helloLabel + nonce))}. Only a process
// that holds the token can answer, and the token is in the home (0600) and
// in the memory of the daemon that wrote it; so a process that took over
// the port of a stale api.addr cannot, and never sees the token.
const (
	helloPath  = "/v1/hello"
	helloLabel = "ifaced control API hello v1\n"
	nonceBytes = 32
	// helloTimeout bounds the exchange on a new connection.
	helloTimeout = 5 * time.Second
	// maxHelloAnswer bounds the answer a client reads.
	maxHelloAnswer = 4 << 10
)

// Hello is the answer to GET /v1/hello.
type Hello struct {
	Proof string `json:"proof"`
}

// errUnproven: what answers on the TCP address could not prove it holds
// the token.
var errUnproven = errors.New("it could not prove it holds this home's API token")

func helloProof(token []byte, nonce string) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(helloLabel))
	m.Write([]byte(nonce))
	return m.Sum(nil)
}

// hello answers a client's challenge; it needs no token.
func (s *Server) hello(w http.ResponseWriter, r *http.Request) {
	nonce := r.URL.Query().Get("nonce")
	if b, err := hex.DecodeString(nonce); err != nil || len(b) != nonceBytes {
		writeError(w, badField("nonce", "want %d random bytes in hex, got %q", nonceBytes, nonce))
		return
	}
	writeJSON(w, http.StatusOK, Hello{Proof: hex.EncodeToString(helloProof(s.token, nonce))})
}

// proveServer runs the hello exchange on c, a new connection to host, and
// returns nil only when the answer proves the other end holds token. It
// leaves nothing of the exchange buffered, so the connection goes on
// carrying requests.
func proveServer(c net.Conn, host string, token []byte) error {
	raw := make([]byte, nonceBytes)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	nonce := hex.EncodeToString(raw)
	c.SetDeadline(time.Now().Add(helloTimeout))
	req, err := http.NewRequest(http.MethodGet, "http://"+host+helloPath+"?nonce="+nonce, nil)
	if err != nil {
		return err
	}
	if err := req.Write(c); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	br := bufio.NewReaderSize(c, maxHelloAnswer)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("%w (reading its answer: %v)", errUnproven, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHelloAnswer))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%w (reading its answer: %v)", errUnproven, err)
	}
	var h Hello
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil {
		return fmt.Errorf("%w (it answered %s)", errUnproven, resp.Status)
	}
	got, err := hex.DecodeString(h.Proof)
	if err != nil || !hmac.Equal(got, helloProof(token, nonce)) {
		return fmt.Errorf("%w (wrong proof)", errUnproven)
	}
	if br.Buffered() > 0 {
		return fmt.Errorf("%w (it sent more than its answer)", errUnproven)
	}
	c.SetDeadline(time.Time{})
	return nil
}
