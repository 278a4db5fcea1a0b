package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
)

// ErrNoDaemon means no daemon is running for a data directory: it has
// neither an API socket nor an address file, or nothing answers at them (a
// daemon that did not stop cleanly leaves both behind), or what answers at
// the address cannot prove it is that daemon (ErrUnproven too).
var ErrNoDaemon = errors.New("no ifaced is running")

// ErrUnproven means the process listening at the address in api.addr could
// not prove it holds the home's token, so the client did not send it.
var ErrUnproven = errUnproven

// callTimeout bounds one call that is not the event stream; it is above
// the server's own write timeout, so the server's answer (504 included)
// arrives first.
const callTimeout = 2 * time.Minute

// Client talks to one daemon's control API.
type Client struct {
	base  string // http://host:port, or http://localhost over the socket
	where string // the socket's path or the TCP address, for messages
	token string
	http  *http.Client
}

// Dial finds the daemon running for home: through its Unix socket when
// there is one, else through the address in api.addr, on connections
// where the daemon first proved it holds the token (see the package
// comment). A home that group or others may write is refused, since
// whoever could write there could have made the socket.
func Dial(home config.Home) (*Client, error) {
	noDaemon := fmt.Errorf("%w for %s (start one with \"ifaced run\")", ErrNoDaemon, home.Dir)
	sock := SocketFile(home)
	st, err := os.Lstat(sock)
	switch {
	case err == nil:
		if !isSocket(st) {
			return nil, fmt.Errorf("finding the daemon: %s is not a socket", sock)
		}
		if err := home.CheckPermissions(); err != nil {
			return nil, fmt.Errorf("finding the daemon: %w", err)
		}
		conn, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			return nil, noDaemon // left by a daemon that did not stop cleanly
		}
		conn.Close()
		tok, err := readToken(TokenFile(home))
		if err != nil {
			return nil, err
		}
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "unix", sock)
		}
		return newClient("http://localhost", sock, tok, dial), nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("finding the daemon: %w", err)
	}
	b, err := os.ReadFile(AddrFile(home))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noDaemon
	}
	if err != nil {
		return nil, fmt.Errorf("finding the daemon: %w", err)
	}
	addr := strings.TrimSpace(string(b))
	if err := checkLoopback(addr); err != nil {
		return nil, fmt.Errorf("finding the daemon: %s: %w", AddrFile(home), err)
	}
	if err := home.CheckPermissions(); err != nil {
		return nil, fmt.Errorf("finding the daemon: %w", err)
	}
	tok, err := readToken(TokenFile(home))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noDaemon
	}
	if err != nil {
		return nil, err
	}
	// Every connection that will carry the token is proven first.
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if err := proveServer(conn, addr, tok); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
	conn, err := dial(context.Background(), "", "")
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return nil, noDaemon
	case err != nil:
		return nil, fmt.Errorf("%w for %s: the process listening on %s (named in %s) is not it: %w; the file is left from a daemon that did not stop cleanly",
			ErrNoDaemon, home.Dir, addr, AddrFile(home), err)
	}
	conn.Close()
	return newClient("http://"+addr, addr, tok, dial), nil
}

// newClient builds a client on its own transport: the API is local, and no
// proxy from the environment may see the token.
func newClient(base, where string, tok []byte, dial func(context.Context, string, string) (net.Conn, error)) *Client {
	tr := &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	return &Client{base: base, where: where, token: string(tok), http: &http.Client{Transport: tr}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Status describes the daemon.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	return &out, c.call(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// Peers lists the peer cache and the connected peers.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var out PeerList
	err := c.call(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return out.Peers, err
}

// Peer returns one peer's entry of Peers, from the daemon's cache and
// connections alone: the daemon does not ask the peer.
func (c *Client) Peer(ctx context.Context, peer string) (*Peer, error) {
	var out Peer
	return &out, c.call(ctx, http.MethodGet, "/v1/peers/"+url.PathEscape(peer), nil, &out)
}

// Connect dials a peer by multiaddr and returns its peer ID.
func (c *Client) Connect(ctx context.Context, addr string) (string, error) {
	var out ConnectResult
	err := c.call(ctx, http.MethodPost, "/v1/connect", ConnectRequest{Addr: addr}, &out)
	return out.Peer, err
}

// Document returns the daemon's own signed capability document.
func (c *Client) Document(ctx context.Context) (*negotiate.Document, error) {
	var out negotiate.Document
	return &out, c.call(ctx, http.MethodGet, "/v1/caps", nil, &out)
}

// PeerCapabilities returns the view peer showed this daemon: the cached
// one, or with refresh (or when none is cached) a fresh one.
func (c *Client) PeerCapabilities(ctx context.Context, peer string, refresh bool) (*PeerCaps, error) {
	path := "/v1/caps/" + url.PathEscape(peer)
	if refresh {
		path += "?refresh=1"
	}
	var out PeerCaps
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}

// OwnDocument returns the daemon's own document with where each
// capability comes from.
func (c *Client) OwnDocument(ctx context.Context) (*OwnDocument, error) {
	var out OwnDocument
	return &out, c.call(ctx, http.MethodGet, "/v1/document", nil, &out)
}

// AddCapability adds one capability, given as a JSON object, or several,
// given as an array of them (all or none), and returns the new document.
// They are kept across restarts.
func (c *Client) AddCapability(ctx context.Context, capability json.RawMessage) (*negotiate.Document, error) {
	var out negotiate.Document
	return &out, c.call(ctx, http.MethodPost, "/v1/caps", capability, &out)
}

// RemoveCapability removes a capability by name, kept removed across
// restarts, and returns the new document.
func (c *Client) RemoveCapability(ctx context.Context, name string) (*negotiate.Document, error) {
	var out negotiate.Document
	return &out, c.call(ctx, http.MethodDelete, "/v1/caps/"+url.PathEscape(name), nil, &out)
}

// Greet opens a conversation with a peer.
func (c *Client) Greet(ctx context.Context, req GreetRequest) (*converse.GreetResult, error) {
	var out converse.GreetResult
	return &out, c.call(ctx, http.MethodPost, "/v1/greet", req, &out)
}

// Conversations lists the open conversations.
func (c *Client) Conversations(ctx context.Context) ([]converse.ConversationInfo, error) {
	var out ConversationList
	err := c.call(ctx, http.MethodGet, "/v1/conversations", nil, &out)
	return out.Conversations, err
}

// Say sends a message in an open conversation and returns it as sent.
func (c *Client) Say(ctx context.Context, req SayRequest) (*gossip.Message, error) {
	var out gossip.Message
	return &out, c.call(ctx, http.MethodPost, "/v1/say", req, &out)
}

// AuditConversations lists the recorded conversations, newest first; a
// non-empty peer keeps those with that peer.
func (c *Client) AuditConversations(ctx context.Context, peer string) (*AuditList, error) {
	path := "/v1/audit"
	if peer != "" {
		path += "?peer=" + url.QueryEscape(peer)
	}
	var out AuditList
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}

// AuditEntries returns one recorded conversation.
func (c *Client) AuditEntries(ctx context.Context, conversationID string) (*AuditConversation, error) {
	var out AuditConversation
	return &out, c.call(ctx, http.MethodGet, "/v1/audit?conversation="+url.QueryEscape(conversationID), nil, &out)
}

// call sends one request and decodes the answer into out, or returns the
// daemon's *Error.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, ok := body.(json.RawMessage)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, rd)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return nil
}

// do sends a request and returns a 2xx response; any other status becomes
// the daemon's *Error.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("talking to the daemon at %s: %w", c.where, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if json.Unmarshal(raw, e) != nil || e.Message == "" {
		e.Code = CodeInternal
		e.Message = fmt.Sprintf("%s %s: the daemon answered %s", method, path, resp.Status)
	}
	return nil, e
}

// Events subscribes to the daemon's event stream. It returns once the
// daemon has subscribed, so nothing that happens afterwards is missed.
func (c *Client) Events(ctx context.Context) (*EventStream, error) {
	return c.events(ctx, "/v1/events")
}

// Observe subscribes to the event stream as an observer: it gets the same
// events, but the daemon does not count it as the local agent, so
// invocations are not sent its way (a tool following the daemon, such as
// the MCP endpoint, must not make peers wait agent.timeout).
func (c *Client) Observe(ctx context.Context) (*EventStream, error) {
	return c.events(ctx, "/v1/events?role=observer")
}

func (c *Client) events(ctx context.Context, path string) (*EventStream, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	// An event carries a whole message, and messages may be up to a 1 MiB
	// frame; their JSON is larger than their CBOR.
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// EventStream reads server-sent events.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Next returns the next event; io.EOF when the stream ended (the daemon
// stopped, or dropped a subscriber that fell behind after an events_lost
// event).
func (s *EventStream) Next() (events.Event, error) {
	var data []byte
	for s.sc.Scan() {
		line := s.sc.Bytes()
		switch {
		case len(line) == 0:
			if data == nil {
				continue // the end of a comment or of an event without data
			}
			var ev events.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				return events.Event{}, fmt.Errorf("reading event: %w", err)
			}
			return ev, nil
		case line[0] == ':': // a comment: the subscription notice or a heartbeat
		case bytes.HasPrefix(line, []byte("data:")):
			if data != nil {
				data = append(data, '\n') // an event's data lines are joined by line breaks
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if err := s.sc.Err(); err != nil {
		return events.Event{}, fmt.Errorf("reading events: %w", err)
	}
	return events.Event{}, io.EOF
}

// Close ends the subscription.
func (s *EventStream) Close() error { return s.body.Close() }
