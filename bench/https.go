package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
)

// The card server's routes: one builds and signs the card for every
// request, as node/httpapi does; the other serves a card signed once.
// Both answer If-None-Match with 304 Not Modified when the client holds
// the card they would serve.
const (
	cardPath       = "/.well-known/agent-card.json"
	cachedCardPath = "/cached/.well-known/agent-card.json"
	exchangePath   = "/exchange/agent-card" // the mutual TLS server's: POST your card, get mine
)

// cardServer serves an A2A agent card over HTTPS (TLS 1.3, a self-signed
// ECDSA P-256 certificate made at start) on loopback.
type cardServer struct {
	srv   *http.Server
	url   string // https://127.0.0.1:port
	roots *x509.CertPool
	kid   string // the key ID the card is signed under
	pub   ed25519.PublicKey
	card  []byte // the card signed once, as served
	etag  string // its strong entity tag
}

// startCardServer serves the card of view (a 20-capability view for an
// authenticated peer, so every skill is on it) signed by signer.
func startCardServer(view *negotiate.Document, signer *identity.Identity) (*cardServer, error) {
	cert, roots, err := selfSignedCert(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for HTTPS: %w", err)
	}
	s := &cardServer{url: "https://" + ln.Addr().String(), roots: roots, kid: signer.KeyID(), pub: signer.PublicKey()}
	opts := negotiate.A2AOptions{URL: s.url + "/a2a"}
	if s.card, err = signedCard(view, opts, signer); err != nil {
		ln.Close()
		return nil, err
	}
	s.etag = entityTag(s.card)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+cardPath, func(w http.ResponseWriter, r *http.Request) {
		raw, err := signedCard(view, opts, signer)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		serveCard(w, r, raw, entityTag(raw))
	})
	mux.HandleFunc("GET "+cachedCardPath, func(w http.ResponseWriter, r *http.Request) {
		serveCard(w, r, s.card, s.etag)
	})
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13},
		ErrorLog:          log.New(io.Discard, "", 0), // a closed keep-alive connection is not news
	}
	go s.srv.ServeTLS(ln, "", "")
	return s, nil
}

// signedCard is view's A2A card, signed by signer, as JSON.
func signedCard(view *negotiate.Document, opts negotiate.A2AOptions, signer *identity.Identity) ([]byte, error) {
	card := view.AgentCard(opts)
	if len(card.Skills) != len(view.Capabilities) {
		return nil, fmt.Errorf("the card has %d skills, the view %d capabilities", len(card.Skills), len(view.Capabilities))
	}
	if err := card.Sign(signer); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("encoding the card: %w", err)
	}
	return raw, nil
}

// entityTag is a strong entity tag of a representation (RFC 9110 §8.8.3):
// the SHA-256 of its bytes, base64url, quoted. The bytes of a signed card
// include its signature, so a re-signed card gets a new tag.
func entityTag(raw []byte) string {
	sum := sha256.Sum256(raw)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

// serveCard writes raw with its entity tag, or 304 Not Modified when the
// request's If-None-Match names it (RFC 9110 §13.1.2: weak comparison,
// a list of tags, or "*").
func serveCard(w http.ResponseWriter, r *http.Request, raw []byte, etag string) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache") // stored, but revalidated before each use
	if noneMatch(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func noneMatch(headers []string, etag string) bool {
	for _, h := range headers {
		for _, t := range strings.Split(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(etag, "W/") {
				return true
			}
		}
	}
	return false
}

func (s *cardServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

// client is an HTTPS client that trusts the server's certificate and
// speaks TLS 1.3 and HTTP/1.1; keepAlive false makes every request open a
// new connection with a full handshake (no session resumption).
func (s *cardServer) client(keepAlive bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS13},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 64,
	}}
}

// fetchCard GETs the card at path and verifies its signature as an A2A
// client would, trusting only the server's key. It returns the card's
// entity tag, for revalidating it later.
func (s *cardServer) fetchCard(ctx context.Context, c *http.Client, path string) (etag string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return "", fmt.Errorf("fetching the card: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching the card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching the card: %s", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, negotiate.MaxAgentCardSize+1))
	if err != nil {
		return "", fmt.Errorf("reading the card: %w", err)
	}
	if _, err := negotiate.VerifyAgentCard(raw, keyResolver(s.kid, s.pub)); err != nil {
		return "", err
	}
	etag = resp.Header.Get("ETag")
	if etag == "" {
		return "", errors.New("fetching the card: the answer has no ETag")
	}
	return etag, nil
}

// revalidate asks whether the card tagged etag, which the client holds
// (verified when it was fetched), is still the one served: 304 Not
// Modified, no body, nothing to verify. It is the HTTP analogue of a
// greeting answered view_unchanged.
func (s *cardServer) revalidate(ctx context.Context, c *http.Client, path, etag string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return fmt.Errorf("revalidating the card: %w", err)
	}
	req.Header.Set("If-None-Match", etag)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("revalidating the card: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNotModified {
		return fmt.Errorf("revalidating the card: %s, want 304 Not Modified", resp.Status)
	}
	if got := resp.Header.Get("ETag"); got != etag {
		return fmt.Errorf("revalidating the card: 304 with ETag %s, want %s", got, etag)
	}
	return nil
}

// keyResolver trusts pub under kid and nothing else.
func keyResolver(kid string, pub ed25519.PublicKey) func(string) (ed25519.PublicKey, error) {
	return func(k string) (ed25519.PublicKey, error) {
		if k != kid {
			return nil, fmt.Errorf("unknown key %q", k)
		}
		return pub, nil
	}
}

// mtlsExchange is the cold baseline that authenticates both sides and
// exchanges both cards, as a cold greeting does: on a new TLS 1.3
// connection where each side presents a certificate (ECDSA P-256, each
// side's own, trusted by the other), the client POSTs its signed card,
// the server verifies it and answers with its own signed card, which the
// client verifies. Both cards are signed once at start, as a server
// would cache them.
type mtlsExchange struct {
	srv    *http.Server
	url    string
	client *http.Client
	card   []byte             // the client's signed card
	verify func([]byte) error // the client's check of the server's card
}

// startMTLSExchange serves server's card (signed by serverID) to clients
// presenting their certificate and their card (clientView, signed by
// clientID).
func startMTLSExchange(serverView *negotiate.Document, serverID *identity.Identity,
	clientView *negotiate.Document, clientID *identity.Identity) (*mtlsExchange, error) {
	serverCert, serverRoots, err := selfSignedCert(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	clientCert, clientRoots, err := selfSignedCert(x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for mutual TLS: %w", err)
	}
	url := "https://" + ln.Addr().String()
	serverCard, err := signedCard(serverView, negotiate.A2AOptions{URL: url + "/a2a"}, serverID)
	if err != nil {
		ln.Close()
		return nil, err
	}
	clientCard, err := signedCard(clientView, negotiate.A2AOptions{URL: "https://client.invalid/a2a"}, clientID)
	if err != nil {
		ln.Close()
		return nil, err
	}
	fromClient := keyResolver(clientID.KeyID(), clientID.PublicKey())
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+exchangePath, func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate is required", http.StatusUnauthorized)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, negotiate.MaxAgentCardSize))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if _, err := negotiate.VerifyAgentCard(raw, fromClient); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(serverCard)
	})
	x := &mtlsExchange{url: url, card: clientCard}
	x.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientRoots},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	x.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: serverRoots, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS13},
		DisableKeepAlives: true, // every exchange is a new connection with a full handshake
	}}
	fromServer := keyResolver(serverID.KeyID(), serverID.PublicKey())
	x.verify = func(raw []byte) error {
		_, err := negotiate.VerifyAgentCard(raw, fromServer)
		return err
	}
	go x.srv.ServeTLS(ln, "", "")
	return x, nil
}

// once is one exchange on a new connection.
func (x *mtlsExchange) once(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.url+exchangePath, bytes.NewReader(x.card))
	if err != nil {
		return 0, fmt.Errorf("exchanging cards: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := x.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("exchanging cards: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, negotiate.MaxAgentCardSize+1))
	if err != nil {
		return 0, fmt.Errorf("reading the server's card: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("exchanging cards: %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := x.verify(raw); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (x *mtlsExchange) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if x.srv.Shutdown(ctx) != nil {
		x.srv.Close()
	}
}

// selfSignedCert makes an ECDSA P-256 certificate for 127.0.0.1, for
// usage, and a pool that trusts it.
func selfSignedCert(usage x509.ExtKeyUsage) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generating the TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "ifaced bench"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("creating the TLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("parsing the TLS certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots, nil
}
