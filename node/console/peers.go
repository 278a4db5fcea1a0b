package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MaxListedPeers bounds the rows of the peers page (each costs a
// GET /v1/seen); the rest are counted.
const MaxListedPeers = 200

// peerPages are /ui/peers and /ui/peers/{peer}: who the peers are, what
// this daemon established about each and granted it, what each sees of
// this agent and what it offers.
type peerPages struct{ c *Console }

type peerRow struct {
	api.Peer
	Name     string
	Seen     *api.Seen
	Eligible int
	Held     int    // capabilities eligible in the view it holds
	Problem  string // why Seen is missing
}

type peersData struct {
	Rows    []peerRow
	Omitted int
	AsOf    time.Time // the counts are as of this load
}

func (p *peerPages) list(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	ps, err := p.c.api.Peers(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "listing the peers: "+err.Error())
		return
	}
	l := p.c.labels(ctx)
	d := peersData{AsOf: p.c.now()}
	for i, pr := range ps {
		if i == MaxListedPeers {
			d.Omitted = len(ps) - i
			break
		}
		row := peerRow{Peer: pr, Name: l.Name(pr.PeerID)}
		if s, err := p.c.api.Seen(ctx, api.SeenQuery{Peer: pr.PeerID}); err != nil {
			row.Problem = err.Error()
		} else {
			row.Seen = s
			for _, sc := range s.Capabilities {
				if sc.Standing == api.StandingEligible {
					row.Eligible++
				}
			}
			if s.Holds != nil {
				row.Held = len(s.Holds.Eligible)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	p.c.pages.render(w, http.StatusOK, "peers", p.c.data(v, "Peers", "peers", d))
}

type peerData struct {
	ID       string
	Name     string
	Peer     *api.Peer // nil: not in the peer cache
	Trust    *trust.Info
	Seen     *seenView
	Persona  string
	Open     []converse.ConversationInfo
	Offers   *api.PeerCaps
	Refresh  bool   // the offers were just asked for
	NoOffers string // why Offers is nil
	Audit    []gossip.AuditConversation
	Labels   labels
}

// resolve reads a peer reference of the owner's as the command line does
// for a verb that grants nothing (cmd/ifaced's peerRef): an alias; a peer
// ID, did:key or agent ID, passed to the API as written, which resolves
// it; or the display name of exactly one known peer. Anything else is
// passed on, and the API says it is unknown.
func (l labels) resolve(ref string) string {
	ref = strings.TrimSpace(ref)
	if id, ok := l.byAlias[ref]; ok {
		return id
	}
	if _, err := peer.Decode(ref); err == nil || strings.ContainsAny(ref, ":@") {
		return ref
	}
	found := ""
	for _, id := range l.ids {
		if l.peers[id] == ref {
			if found != "" {
				return ref // two peers call themselves so: the API says it does not know which
			}
			found = id
		}
	}
	if found != "" {
		return found
	}
	return ref
}

func (p *peerPages) one(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	l := p.c.labels(ctx)
	q := r.URL.Query()
	d := peerData{Persona: q.Get("persona"), Refresh: q.Get("refresh") != "", Labels: l}
	seen, err := p.c.api.Seen(ctx, api.SeenQuery{Peer: l.resolve(r.PathValue("peer")), Persona: d.Persona})
	if err != nil {
		p.c.fail(w, v, apiStatus(err), fmt.Sprintf("peer %q: %v", r.PathValue("peer"), err))
		return
	}
	d.Seen, d.ID, d.Name = makeSeenView(seen), seen.Peer, l.Name(seen.Peer)
	if ps, err := p.c.api.Peers(ctx); err == nil {
		for i := range ps {
			if ps[i].PeerID == d.ID {
				d.Peer = &ps[i]
			}
		}
	}
	if ts, err := p.c.api.Trust(ctx); err == nil {
		for i := range ts {
			if ts[i].Peer == d.ID {
				d.Trust = &ts[i]
			}
		}
	}
	if d.Trust == nil {
		d.Trust = &trust.Info{Peer: d.ID, Level: seen.Facts.Level, How: seen.Facts.LevelHow}
		if pid, err := peer.Decode(d.ID); err == nil {
			if pub, err := identity.PublicKeyFromPeerID(pid); err == nil {
				d.Trust.Fingerprint = identity.Fingerprint(pub)
			}
		}
	}
	if open, err := p.c.api.Conversations(ctx); err == nil {
		for _, o := range open {
			if o.Peer == d.ID {
				d.Open = append(d.Open, o)
			}
		}
	}
	switch {
	case d.Refresh || d.Peer != nil && d.Peer.Cached:
		pc, err := p.c.api.PeerCapabilities(ctx, d.ID, d.Refresh)
		var ae *api.Error
		switch {
		case err == nil:
			d.Offers = pc
		case errors.As(err, &ae):
			d.NoOffers = ae.Message
		default:
			d.NoOffers = err.Error()
		}
	default:
		d.NoOffers = "it has shown this daemon no view yet: greet it (`ifaced greet PEER`), or ask it now with the link below"
	}
	if al, err := p.c.api.AuditConversations(ctx, d.ID); err == nil {
		d.Audit = al.Conversations
		if len(d.Audit) > 20 {
			d.Audit = d.Audit[:20]
		}
	}
	title := d.Name
	if title == "" {
		title = shortID(d.ID)
	}
	p.c.pages.render(w, http.StatusOK, "peer", p.c.data(v, "Peer "+title, "peers", d))
}
