package trust

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Held is the introduction tokens other daemons minted for this one: it
// keeps them (in the store, and in memory by issuer) and attaches the
// proof of one to each greeting for its issuer. It is a room of its own
// beside the Book, which admits the proofs of the tokens this daemon
// minted: nothing a held token says changes a trust record.
type Held struct {
	store Store
	did   string // this daemon's did:key: a token it minted is not one to hold
	now   func() time.Time
	log   *slog.Logger

	wmu    sync.Mutex // one change of a held token at a time
	mu     sync.RWMutex
	tokens map[peer.ID][]heldIntro // by issuer
}

// newHeld loads the held tokens of st; one that does not parse is logged
// and left out.
func newHeld(st Store, did string, now func() time.Time, log *slog.Logger) *Held {
	h := &Held{store: st, did: did, now: now, log: log, tokens: map[peer.ID][]heldIntro{}}
	recs, err := st.HeldIntros()
	if err != nil {
		log.Warn("reading held introduction tokens", "err", err)
	}
	for _, r := range recs {
		if err := h.add(r); err != nil {
			log.Warn("ignoring a held introduction token", "id", r.ID, "err", err)
		}
	}
	return h
}

// Accept stores a token another daemon minted for this one, so that
// greetings to its issuer carry the proof. An expired token, or one this
// daemon minted itself, is refused.
func (h *Held) Accept(token string) (HeldIntroInfo, error) {
	tok, err := identity.ParseIntroduction(token)
	if err != nil {
		return HeldIntroInfo{}, &InputError{Field: "token", Err: err}
	}
	now := h.now()
	if !now.Before(tok.Expires) {
		return HeldIntroInfo{}, &InputError{Field: "token", Err: fmt.Errorf("%w: token %s (%q) from %s expired on %s; ask its issuer for a new one",
			identity.ErrIntroExpired, tok.ID, tok.Label, tok.Issuer, tok.Expires.Format(time.RFC3339))}
	}
	if tok.Issuer == h.did {
		return HeldIntroInfo{}, &InputError{Field: "token", Err: fmt.Errorf("%w: give it to the peer you meant to introduce; they run `ifaced accept-intro` with it", ErrOwnIntro)}
	}
	rec := store.HeldIntro{ID: tok.ID, Issuer: tok.Issuer, Label: tok.Label, Expires: tok.Expires,
		Token: tok.Encode(), AcceptedAt: now.UTC()}
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := h.store.PutHeldIntro(rec); err != nil {
		return HeldIntroInfo{}, err
	}
	if err := h.add(rec); err != nil {
		return HeldIntroInfo{}, err
	}
	info := heldInfo(tok, rec.AcceptedAt)
	h.log.Info("accepted introduction token", "id", tok.ID, "label", tok.Label, "issuer", info.IssuerPeer, "expires", tok.Expires)
	return info, nil
}

// List lists the tokens other daemons minted for this one.
func (h *Held) List() []HeldIntroInfo {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []HeldIntroInfo
	for _, toks := range h.tokens {
		for _, t := range toks {
			out = append(out, heldInfo(t.Introduction, t.accepted))
		}
	}
	slices.SortFunc(out, func(a, b HeldIntroInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// heldIntro is a held token in memory.
type heldIntro struct {
	*identity.Introduction
	accepted time.Time
}

func heldInfo(tok *identity.Introduction, accepted time.Time) HeldIntroInfo {
	info := HeldIntroInfo{ID: tok.ID, Label: tok.Label, Issuer: tok.Issuer, Expires: tok.Expires, AcceptedAt: accepted}
	if pid, err := issuerPeer(tok.Issuer); err == nil {
		info.IssuerPeer = pid.String()
	}
	return info
}

func issuerPeer(did string) (peer.ID, error) {
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil {
		return "", err
	}
	return identity.PeerIDFromPublicKey(pub)
}

// add keeps a held token in memory under its issuer, replacing one of
// the same ID.
func (h *Held) add(rec store.HeldIntro) error {
	tok, err := identity.ParseIntroduction(rec.Token)
	if err != nil {
		return err
	}
	pid, err := issuerPeer(tok.Issuer)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	toks := slices.DeleteFunc(slices.Clone(h.tokens[pid]), func(t heldIntro) bool { return t.ID == tok.ID })
	h.tokens[pid] = append(toks, heldIntro{Introduction: tok, accepted: rec.AcceptedAt})
	return nil
}

// For is the token to prove to pid: of those pid issued that have not
// expired, the one that lasts longest.
func (h *Held) For(pid peer.ID, now time.Time) *identity.Introduction {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var best *identity.Introduction
	for _, t := range h.tokens[pid] {
		if now.Before(t.Expires) && (best == nil || t.Expires.After(best.Expires)) {
			best = t.Introduction
		}
	}
	return best
}

// Attach adds to a greeting for pid the proof of an introduction
// token this daemon holds for pid, if it holds one that has not expired.
func (h *Held) Attach(pid peer.ID, m *gossip.Message) error {
	now := h.now()
	tok := h.For(pid, now)
	if tok == nil {
		return nil
	}
	return m.AddIntroProof(tok, now)
}
