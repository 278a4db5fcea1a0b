// Package policy is the owner's policy: the disclosure map by persona and
// peer (IFP-12) and the temperature caps, from the configuration with the
// owner's run-time changes on top (persisted in the store). Grants are
// computed from it by negotiate.Policy.GrantTo; this package only keeps it
// and changes it. Book is the component, New builds it; it imports no
// other component, so that every one that grants (conversations, the HTTP
// binding, discovery, the trust book deciding who the owner made known)
// reads the same book.
package policy

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/store"
)

// Book is the owner's policy, kept and changed.
type Book struct {
	cfg   *config.Config
	order *conditions.TierOrder
	store policyStore

	changeMu sync.Mutex // one change at a time: its store write and reload
	mu       sync.Mutex
	policy   *negotiate.Policy
}

// policyStore is what the policy keeps in the store.
type policyStore interface {
	PolicyOverrides() (store.PolicyOverrides, error)
	SetDisclosure(persona, peer, tier string) error
	SetMaxTemperature(peer, max string) error
}

var _ policyStore = (*store.Store)(nil)

func New(cfg *config.Config, order *conditions.TierOrder, st policyStore) (*Book, error) {
	p := &Book{cfg: cfg, order: order, store: st}
	return p, p.reload()
}

// ErrInvalidPolicy wraps a policy change that cannot be applied.
var ErrInvalidPolicy = errors.New("invalid policy change")

// policyFrom turns the disclosure and temperature config, with the
// owner's run-time overrides on top, into a policy.
func policyFrom(cfg *config.Config, order *conditions.TierOrder, o store.PolicyOverrides) *negotiate.Policy {
	p := &negotiate.Policy{Order: order, DefaultTier: cfg.Disclosure.Default, Map: map[string]map[string]string{},
		DefaultMaxTemp: cfg.Temperature.DefaultMax, MaxTemp: map[string]string{}, OpenPersonas: cfg.Disclosure.OpenPersonas}
	for _, layer := range []map[string]map[string]string{cfg.Disclosure.Personas, o.Disclosure} {
		for persona, peers := range layer {
			if p.Map[persona] == nil {
				p.Map[persona] = map[string]string{}
			}
			for peer, tier := range peers {
				p.Map[persona][peer] = tier
			}
		}
	}
	for _, layer := range []map[string]string{cfg.Temperature.Peers, o.MaxTemperature} {
		for peer, t := range layer {
			p.MaxTemp[peer] = t
		}
	}
	return p
}

// reload rebuilds the policy from the config and the stored overrides.
func (p *Book) reload() error {
	o, err := p.store.PolicyOverrides()
	if err != nil {
		return err
	}
	next := policyFrom(p.cfg, p.order, o)
	p.mu.Lock()
	p.policy = next
	p.mu.Unlock()
	return nil
}

// InForce is the policy in force (shared: never modified).
func (p *Book) InForce() *negotiate.Policy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.policy
}

// Current returns the policy in force: the config's disclosure map and
// temperature caps with the run-time changes applied.
func (p *Book) Current() negotiate.Policy { return *p.InForce() }

// SetDisclosure grants peer (a peer ID or agent ID) tier under persona
// ("default" for the owner's undifferentiated context), or removes the
// run-time grant when tier is empty so the config's applies again. It
// persists and applies from the peer's next greeting; grants already made
// in open conversations do not go down.
func (p *Book) SetDisclosure(persona, peer, tier string) error {
	p.changeMu.Lock()
	defer p.changeMu.Unlock()
	if persona == "" {
		persona = negotiate.DefaultPersona
	}
	if peer == "" {
		return fmt.Errorf("%w: peer is required", ErrInvalidPolicy)
	}
	if tier != "" && !p.order.Known(tier) {
		return fmt.Errorf("%w: %q is not a known tier (known: %s)", ErrInvalidPolicy, tier, strings.Join(p.order.Tiers(), ", "))
	}
	if err := p.store.SetDisclosure(persona, peer, tier); err != nil {
		return err
	}
	return p.reload()
}

// SetMaxTemperature caps the temperature peer may reach (cool, warm, hot),
// or removes the run-time cap when max is empty.
func (p *Book) SetMaxTemperature(peer, max string) error {
	p.changeMu.Lock()
	defer p.changeMu.Unlock()
	if peer == "" {
		return fmt.Errorf("%w: peer is required", ErrInvalidPolicy)
	}
	if _, ok := conditions.TemperatureRank(max); max != "" && !ok {
		return fmt.Errorf("%w: temperature %q: want cool, warm or hot", ErrInvalidPolicy, max)
	}
	if err := p.store.SetMaxTemperature(peer, max); err != nil {
		return err
	}
	return p.reload()
}

// CarryOver gives next, as run-time policy entries, the disclosure tiers
// (under every persona) and the temperature cap the policy in force gives
// old, where it gives next none. It returns what it carried.
func (p *Book) CarryOver(old, next string) ([]string, error) {
	pol := p.InForce()
	var carried []string
	for persona, peers := range pol.Map {
		tier, ok := peers[old]
		if _, has := peers[next]; !ok || has {
			continue
		}
		if err := p.SetDisclosure(persona, next, tier); err != nil {
			return carried, err
		}
		carried = append(carried, fmt.Sprintf("tier %s under %s", tier, persona))
	}
	if t, ok := pol.MaxTemp[old]; ok {
		if _, has := pol.MaxTemp[next]; !has {
			if err := p.SetMaxTemperature(next, t); err != nil {
				return carried, err
			}
			carried = append(carried, "temperature cap "+t)
		}
	}
	return carried, nil
}
