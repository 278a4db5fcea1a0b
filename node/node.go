package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/multiformats/go-multiaddr"
)

// Node is a running daemon.
type Node struct {
	id   *identity.Identity
	cfg  *Config
	log  *slog.Logger
	host host.Host

	doc          *negotiate.Document // the owner's document, signed
	docCanonical []byte              // its canonical bytes, kept per seq
}

// New starts a daemon: it builds and signs the owner's capability
// document, then starts the libp2p host on the configured addresses.
func New(cfg *Config, id *identity.Identity, log *slog.Logger) (*Node, error) {
	doc, err := cfg.Document(id.DID())
	if err != nil {
		return nil, fmt.Errorf("building capability document: %w", err)
	}
	doc.Updated = time.Now().UTC().Format(time.RFC3339)
	canon, err := doc.Sign(id, time.Now())
	if err != nil {
		return nil, err
	}
	h, err := newHost(cfg, id)
	if err != nil {
		return nil, err
	}
	n := &Node{id: id, cfg: cfg, log: log, host: h, doc: doc, docCanonical: canon}
	log.Info("ifaced started", "peer", id.PeerID(), "did", id.DID(), "addrs", n.Addrs(), "capabilities", len(doc.Capabilities))
	return n, nil
}

// Addrs returns the host's listen addresses with the peer ID appended, as
// another daemon would dial them.
func (n *Node) Addrs() []multiaddr.Multiaddr {
	suffix, _ := multiaddr.NewMultiaddr("/p2p/" + n.id.PeerID().String())
	addrs := n.host.Addrs()
	out := make([]multiaddr.Multiaddr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Encapsulate(suffix))
	}
	return out
}

// Host exposes the libp2p host, for tests and for the packages that wire
// protocols onto it.
func (n *Node) Host() host.Host { return n.host }

// Document returns the owner's signed capability document.
func (n *Node) Document() *negotiate.Document { return n.doc }

// Run serves until ctx ends, then shuts down.
func (n *Node) Run(ctx context.Context) error {
	<-ctx.Done()
	return n.Close()
}

// Close stops the host.
func (n *Node) Close() error {
	if err := n.host.Close(); err != nil {
		return fmt.Errorf("closing libp2p host: %w", err)
	}
	n.log.Info("ifaced stopped", "peer", n.id.PeerID())
	return nil
}
