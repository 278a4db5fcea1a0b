package discovery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/capdht"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Limits of Find: the lookup's are the DHT's (node/capdht); asking each
// provider for its view is Find's.
const (
	DefaultFindLimit = capdht.DefaultFindLimit // providers looked up when the caller says 0
	MaxFindLimit     = capdht.MaxFindLimit     // the most one Find looks up
	findQueryTimeout = 20 * time.Second        // opening the capabilities query with one provider
	findParallel     = 8                       // providers asked at once
)

// Errors of Find; each is wrapped with the capability asked for. A name
// or version Find cannot read is negotiate.ErrInvalidName or
// negotiate.ErrInvalidVersion.
var (
	ErrDHTOff     = capdht.ErrDHTOff     // discovery.dht is off
	ErrNoDHTPeers = capdht.ErrNoDHTPeers // the routing table is empty (the error says what would help)
)

// FindResult statuses, in the order Find sorts them.
const (
	FindEligible        = "eligible"          // offered to you, and you meet its conditions now
	FindIneligible      = "ineligible"        // offered to you; Why says what is missing
	FindBelowMinVersion = "below_min_version" // offered, at a version below the one asked for
	FindNotOffered      = "not_offered"       // the peer's view for you does not list it (hidden from you, or removed since its record went out)
	FindUnreachable     = "unreachable"       // the peer could not be asked; Error says why
	FindImported        = "imported"          // an outside agent the owner imported; its conditions are unknown
)

var findRank = map[string]int{FindEligible: 0, FindIneligible: 1, FindBelowMinVersion: 2, FindNotOffered: 3, FindUnreachable: 4, FindImported: 5}

// FindResult is one provider of a capability, as its own view for this
// daemon shows it.
type FindResult struct {
	PeerID      string                `json:"peer_id"`
	AgentID     string                `json:"agent_id,omitempty"`
	Display     string                `json:"display,omitempty"`
	Addrs       []string              `json:"addrs,omitempty"`
	Status      string                `json:"status"`
	Why         []string              `json:"why,omitempty"`           // for ineligible and below_min_version, one line per reason
	Capability  *negotiate.Capability `json:"capability,omitempty"`    // as the provider's view shows it: version, description, conditions, unmet
	GrantedToUs *negotiate.Granted    `json:"granted_to_us,omitempty"` // the context the provider granted for that view
	Error       string                `json:"error,omitempty"`         // for unreachable
	// For imported agents: where the document came from, its format, and
	// whether its signature verified.
	Source string `json:"source,omitempty"`
	Format string `json:"format,omitempty"`
	Signed bool   `json:"signed,omitempty"`
}

// Find looks up the providers of capability in the DHT (at most limit of
// them; 0 means DefaultFindLimit) and asks each for its view for this
// daemon, as QueryCapabilities does (so each provider learns who asked):
// the view is verified and cached, and the provider's daemon decides on
// facts it established itself whether we meet the capability's conditions. Each provider is reported with a
// status, eligible ones first. A provider whose view no longer lists the
// capability is reported not_offered and nothing more. With minVersion
// (dotted integers, e.g. "2" or "1.3"), a provider offering a lower version
// is still reported, as below_min_version, so the caller sees why a peer it
// expected is not usable; a version that is not dotted integers cannot be
// compared and counts as below. When the DHT cannot be searched
// (ErrDHTOff, ErrNoDHTPeers), the imports that list the capability are
// returned with that error.
func (d *Discovery) Find(ctx context.Context, capability, minVersion string, limit int) ([]FindResult, error) {
	fail := func(err error) ([]FindResult, error) {
		return nil, fmt.Errorf("finding providers of %q: %w", capability, err)
	}
	if err := negotiate.CheckName(capability); err != nil {
		return fail(err)
	}
	var atLeast []int
	if minVersion != "" {
		var err error
		if atLeast, err = negotiate.ParseVersion(minVersion); err != nil {
			return fail(err)
		}
	}
	switch {
	case limit == 0:
		limit = DefaultFindLimit
	case limit < 0 || limit > MaxFindLimit:
		return fail(fmt.Errorf("limit %d: want 1 to %d", limit, MaxFindLimit))
	}
	imported := d.imports.providers(capability)
	if d.dht == nil || !d.dht.HasPeers() {
		// The imports that list the capability come with the error that
		// says why the DHT was not searched.
		err := ErrDHTOff
		if d.dht != nil {
			err = d.dht.NoServer()
		}
		return imported, fmt.Errorf("finding providers of %q: %w", capability, err)
	}
	provs, err := d.dht.FindProviders(ctx, capability, limit)
	if err != nil {
		return nil, err // says "finding providers of" the capability already
	}
	out := make([]FindResult, len(provs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, findParallel)
	for i, ai := range provs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = d.askProvider(ctx, ai, capability, atLeast)
		})
	}
	wg.Wait()
	out = append(out, imported...)
	slices.SortFunc(out, func(a, b FindResult) int {
		return cmp.Or(cmp.Compare(findRank[a.Status], findRank[b.Status]), cmp.Compare(a.PeerID, b.PeerID), cmp.Compare(a.Source, b.Source))
	})
	return out, nil
}

// askProvider asks one provider for its view for this daemon and reports
// what the view says of capability.
func (d *Discovery) askProvider(ctx context.Context, ai peer.AddrInfo, capability string, atLeast []int) FindResult {
	r := FindResult{PeerID: ai.ID.String()}
	qctx, cancel := context.WithTimeout(ctx, findQueryTimeout)
	defer cancel()
	res, err := d.ask.QueryCapabilities(qctx, ai.ID, negotiate.Proposal{})
	r.Addrs = p2phost.PeerAddrs(d.host, ai.ID)
	if err != nil {
		r.Status, r.Error = FindUnreachable, err.Error()
		return r
	}
	r.AgentID = res.View.AgentID
	if rec, err := d.peers.Peer(r.PeerID); err == nil {
		r.Display = rec.Display
	}
	if g := res.GrantedToUs; g.Disclosure != "" {
		r.GrantedToUs = &g // a peer that sent no context part granted nothing we can show
	}
	c, ok := res.View.Capability(capability)
	if !ok {
		r.Status = FindNotOffered
		return r
	}
	r.Capability = c
	switch {
	case atLeast != nil && !negotiate.VersionAtLeast(c.VersionOrDefault(), atLeast):
		r.Status = FindBelowMinVersion
		r.Why = []string{fmt.Sprintf("offers version %s, below %s", c.VersionOrDefault(), negotiate.FormatVersion(atLeast))}
	case c.Eligible == nil:
		r.Status = FindIneligible
		r.Why = []string{"its view does not say whether you meet the conditions"}
	case *c.Eligible:
		r.Status = FindEligible
	default:
		r.Status = FindIneligible
		for _, u := range c.Unmet {
			r.Why = append(r.Why, fmt.Sprintf("needs %s %s, you have %s", u.Condition, u.Required, u.Have))
		}
	}
	return r
}
