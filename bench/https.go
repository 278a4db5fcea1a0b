package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
)

// The card server's routes: one builds and signs the card for every
// request, as node/httpapi does; the other serves a card signed once.
const (
	cardPath       = "/.well-known/agent-card.json"
	cachedCardPath = "/cached/.well-known/agent-card.json"
)

// cardServer serves an A2A agent card over HTTPS (TLS 1.3, a self-signed
// ECDSA P-256 certificate made at start) on loopback.
type cardServer struct {
	srv   *http.Server
	url   string // https://127.0.0.1:port
	roots *x509.CertPool
	kid   string // the key ID the card is signed under
	pub   ed25519.PublicKey
	size  int // bytes of the signed card
}

// startCardServer serves the card of view (a 20-capability view for an
// authenticated peer, so every skill is on it) signed by signer.
func startCardServer(view *negotiate.Document, signer *identity.Identity) (*cardServer, error) {
	cert, roots, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for HTTPS: %w", err)
	}
	s := &cardServer{url: "https://" + ln.Addr().String(), roots: roots, kid: signer.KeyID(), pub: signer.PublicKey()}
	opts := negotiate.A2AOptions{URL: s.url + "/a2a"}
	card := view.AgentCard(opts)
	if len(card.Skills) != len(view.Capabilities) {
		ln.Close()
		return nil, fmt.Errorf("the card has %d skills, the view %d capabilities", len(card.Skills), len(view.Capabilities))
	}
	if err := card.Sign(signer); err != nil {
		ln.Close()
		return nil, err
	}
	cached, err := json.Marshal(card)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("encoding the card: %w", err)
	}
	s.size = len(cached)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+cardPath, func(w http.ResponseWriter, r *http.Request) {
		card := view.AgentCard(opts)
		if err := card.Sign(signer); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(card)
	})
	mux.HandleFunc("GET "+cachedCardPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(cached)
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
// client would, trusting only the server's key.
func (s *cardServer) fetchCard(ctx context.Context, c *http.Client, path string) (*negotiate.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the card: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the card: %s", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, negotiate.MaxAgentCardSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the card: %w", err)
	}
	card, err := negotiate.VerifyAgentCard(raw, func(kid string) (ed25519.PublicKey, error) {
		if kid != s.kid {
			return nil, fmt.Errorf("unknown key %q", kid)
		}
		return s.pub, nil
	})
	if err != nil {
		return nil, err
	}
	return card, nil
}

// selfSignedCert makes an ECDSA P-256 certificate for 127.0.0.1 and a
// pool that trusts it.
func selfSignedCert() (tls.Certificate, *x509.CertPool, error) {
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
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
