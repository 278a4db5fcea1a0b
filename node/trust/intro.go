package trust

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Introduction tokens (level 0): minted here for a peer whose key the
// owner does not know yet, or held here from another daemon that minted
// one for this one. See the trust rules in the package comment.

// IntroRequest is what `ifaced introduce` asks for.
type IntroRequest struct {
	Label      string
	TTL        time.Duration // 0 means trust.intro_expiry
	Disclosure string        // the least tier the token grants; "" grants none
	Persona    string        // the persona the tier applies under; "" is the default one
}

// Token states of an IssuedIntroInfo.
const (
	IntroUnused  = "unused"
	IntroBound   = "bound"
	IntroExpired = "expired"
	IntroRevoked = "revoked"
)

// IssuedIntroInfo describes a token this daemon minted, without its secret.
type IssuedIntroInfo struct {
	ID         string    `json:"id"`
	Label      string    `json:"label"`
	State      string    `json:"state"` // unused, bound, expired or revoked
	Expires    time.Time `json:"expires"`
	Disclosure string    `json:"disclosure,omitempty"`
	Persona    string    `json:"persona,omitempty"`
	BoundPeer  string    `json:"bound_peer,omitempty"`
	BoundAt    time.Time `json:"bound_at,omitzero"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
	Created    time.Time `json:"created"`
}

// MintedIntro is a token just minted: the string to hand to the other
// human. The daemon never shows the string again.
type MintedIntro struct {
	Token string `json:"token"`
	IssuedIntroInfo
}

// HeldIntroInfo describes a token another daemon minted for this one.
type HeldIntroInfo struct {
	ID         string    `json:"id"`
	Label      string    `json:"label"`
	Issuer     string    `json:"issuer"`      // the issuer's did:key
	IssuerPeer string    `json:"issuer_peer"` // its peer ID
	Expires    time.Time `json:"expires"`
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
}

func (b *Book) issuedInfo(r store.IssuedIntro) IssuedIntroInfo {
	info := IssuedIntroInfo{ID: r.ID, Label: r.Label, Expires: r.Expires, Disclosure: r.Disclosure, Persona: r.Persona,
		BoundPeer: r.BoundPeer, BoundAt: r.BoundAt, RevokedAt: r.RevokedAt, Created: r.Created}
	switch {
	case r.Revoked:
		info.State = IntroRevoked
	case !b.now().Before(r.Expires):
		info.State = IntroExpired
	case r.BoundPeer != "":
		info.State = IntroBound
	default:
		info.State = IntroUnused
	}
	return info
}

// Introduce mints an introduction token issued by this daemon and stores
// it. The token's string is returned once, to be handed to the other human,
// who runs `ifaced accept-intro` with it; the first peer that proves it
// holds the token binds it.
func (b *Book) Introduce(req IntroRequest) (MintedIntro, error) {
	label := strings.TrimSpace(req.Label)
	switch {
	case label == "":
		return MintedIntro{}, inputError("label", "label is required: who is this token for? (e.g. \"Bob from the conference\")")
	case len(label) > identity.MaxIntroLabel:
		return MintedIntro{}, inputError("label", "label is %d bytes, at most %d", len(label), identity.MaxIntroLabel)
	case req.TTL < 0:
		return MintedIntro{}, inputError("expires_seconds", "expiry must be in the future, got %s", req.TTL)
	case req.Disclosure != "" && !b.order.Known(req.Disclosure):
		return MintedIntro{}, inputError("disclosure", "%q is not a known tier (known: %s)", req.Disclosure, strings.Join(b.order.Tiers(), ", "))
	case req.Persona != "" && req.Disclosure == "":
		return MintedIntro{}, inputError("persona", "a persona says where the token's disclosure tier applies: give a disclosure tier too")
	}
	persona := req.Persona
	if persona == negotiate.DefaultPersona {
		persona = ""
	}
	if len(persona) > 128 || strings.ContainsAny(persona, " \t\r\n") {
		return MintedIntro{}, inputError("persona", "%q: at most 128 bytes, no white space", persona)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = b.cfg.IntroExpiry
	}
	now := b.now()
	tok, err := identity.MintIntroduction(b.did, label, ttl, now, nil)
	if err != nil {
		return MintedIntro{}, err
	}
	rec := store.IssuedIntro{ID: tok.ID, Issuer: tok.Issuer, Label: tok.Label, Expires: tok.Expires, Secret: tok.Secret,
		Disclosure: req.Disclosure, Persona: persona, Created: now.UTC()}
	if err := b.store.PutIssuedIntro(rec); err != nil {
		return MintedIntro{}, err
	}
	b.log.Info("minted introduction token", "id", tok.ID, "label", tok.Label, "expires", tok.Expires, "disclosure", req.Disclosure)
	return MintedIntro{Token: tok.Encode(), IssuedIntroInfo: b.issuedInfo(rec)}, nil
}

// IssuedIntros lists the tokens this daemon minted, newest first, without
// their secrets.
func (b *Book) IssuedIntros() ([]IssuedIntroInfo, error) {
	recs, err := b.store.IssuedIntros()
	if err != nil && recs == nil {
		return nil, err
	}
	if err != nil {
		b.log.Warn("reading issued introduction tokens", "err", err)
	}
	out := make([]IssuedIntroInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, b.issuedInfo(r))
	}
	slices.SortStableFunc(out, func(a, b IssuedIntroInfo) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// RevokeIntro revokes a token this daemon minted: no peer is admitted with
// it any more, and the tier it granted its peer is withdrawn from that
// peer's next greeting on.
func (b *Book) RevokeIntro(id string) (IssuedIntroInfo, error) {
	b.imu.Lock()
	defer b.imu.Unlock()
	rec, err := b.store.IssuedIntro(id)
	if errors.Is(err, store.ErrNotFound) {
		return IssuedIntroInfo{}, fmt.Errorf("revoking introduction token %q: %w", id, ErrNoSuchIntro)
	}
	if err != nil {
		return IssuedIntroInfo{}, err
	}
	if !rec.Revoked {
		rec.Revoked, rec.RevokedAt = true, b.now().UTC()
		if err := b.store.PutIssuedIntro(rec); err != nil {
			return IssuedIntroInfo{}, err
		}
		b.log.Info("revoked introduction token", "id", id, "label", rec.Label, "bound_peer", rec.BoundPeer)
	}
	if pid, err := peer.Decode(rec.BoundPeer); err == nil {
		_, err := b.update(pid, func(r *store.TrustRecord) bool {
			before := len(r.Intros)
			r.Intros = slices.DeleteFunc(r.Intros, func(in store.TrustIntro) bool { return in.TokenID == id })
			return len(r.Intros) != before
		})
		if err != nil {
			return IssuedIntroInfo{}, err
		}
	}
	return b.issuedInfo(rec), nil
}

// admitIntro checks the introduction proof in a greeting from pid against
// the token it names. On success the token is bound to pid (on first use)
// and pid's trust record notes the token, whose tier then applies; on
// failure the greeting goes on at the level pid otherwise has, and the
// refusal is logged and kept in pid's trust record.
func (b *Book) admitIntro(pid peer.ID, m *gossip.Message, proof *identity.MessageSignature, now time.Time) {
	id := strings.TrimPrefix(proof.KeyID, "intro:")
	granted, err := b.admitProof(pid, id, m, proof, now)
	if err != nil {
		reason := err.Error()
		b.log.Info("refused introduction proof", "peer", pid, "token", id, "err", reason)
		if _, err := b.update(pid, func(r *store.TrustRecord) bool {
			if r.Refusal == reason {
				return false
			}
			r.Refusal, r.RefusedAt = reason, now.UTC()
			return true
		}); err != nil {
			b.log.Warn("recording a refused introduction", "peer", pid, "err", err)
		}
		return
	}
	if b.testAdmitted != nil {
		b.testAdmitted()
	}
	if _, err := b.update(pid, func(r *store.TrustRecord) bool {
		changed := r.Refusal != ""
		r.Refusal, r.RefusedAt = "", time.Time{}
		i := slices.IndexFunc(r.Intros, func(in store.TrustIntro) bool { return in.TokenID == granted.TokenID })
		// RevokeIntro may have run since the token was admitted, and
		// removed it from this record before it was added: look again,
		// under the lock every change of the record takes.
		if !b.issuedStillGrants(pid, granted.TokenID) {
			if i >= 0 {
				r.Intros = slices.Delete(r.Intros, i, i+1)
				changed = true
			}
			return changed
		}
		switch {
		case i < 0:
			r.Intros = append(r.Intros, granted)
			changed = true
		case r.Intros[i].Disclosure != granted.Disclosure || r.Intros[i].Persona != granted.Persona || !r.Intros[i].Expires.Equal(granted.Expires):
			granted.AdmittedAt = r.Intros[i].AdmittedAt
			r.Intros[i] = granted
			changed = true
		}
		return changed
	}); err != nil {
		b.log.Warn("recording an introduction", "peer", pid, "err", err)
		return
	}
	b.keepRecords(pid)
}

// issuedStillGrants tells whether the token id this daemon issued still
// admits pid: not revoked, bound to pid. A token that cannot be read grants
// nothing.
func (b *Book) issuedStillGrants(pid peer.ID, id string) bool {
	rec, err := b.store.IssuedIntro(id)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			b.log.Warn("reading an issued introduction token", "id", id, "err", err)
		}
		return false
	}
	return !rec.Revoked && rec.BoundPeer == pid.String()
}

// liveIntros are the introductions of pid's record that grant something
// now: unexpired, and their issued token neither revoked nor bound to
// another peer. The issued token decides, not only the record: RevokeIntro
// removes a token from its peer's record after marking it revoked, and a
// failure between the two must not leave the peer introduced.
func (b *Book) liveIntros(pid peer.ID, intros []store.TrustIntro, now time.Time) []store.TrustIntro {
	var out []store.TrustIntro
	for _, in := range intros {
		if now.Before(in.Expires) && b.issuedStillGrants(pid, in.TokenID) {
			out = append(out, in)
		}
	}
	return out
}

// admitProof runs the token's admission and binds it on first use.
func (b *Book) admitProof(pid peer.ID, id string, m *gossip.Message, proof *identity.MessageSignature, now time.Time) (store.TrustIntro, error) {
	b.imu.Lock()
	defer b.imu.Unlock()
	rec, err := b.store.IssuedIntro(id)
	if errors.Is(err, store.ErrNotFound) {
		return store.TrustIntro{}, fmt.Errorf("introduction token %q: %w", id, ErrNoSuchIntro)
	}
	if err != nil {
		return store.TrustIntro{}, err
	}
	headers, body, err := m.SignedValues(proof)
	if err != nil {
		return store.TrustIntro{}, fmt.Errorf("introduction token %s: %w", id, err)
	}
	issued := &identity.IssuedIntroduction{
		Introduction: identity.Introduction{ID: rec.ID, Issuer: rec.Issuer, Label: rec.Label, Expires: rec.Expires, Secret: rec.Secret},
		BoundPeer:    rec.BoundPeer, Revoked: rec.Revoked,
	}
	if err := issued.Admit(pid.String(), proof, headers, body, now); err != nil {
		return store.TrustIntro{}, err
	}
	if rec.BoundPeer == "" {
		rec.BoundPeer, rec.BoundAt = pid.String(), now.UTC()
		if err := b.store.PutIssuedIntro(rec); err != nil {
			return store.TrustIntro{}, err
		}
		b.log.Info("introduction token bound", "id", id, "label", rec.Label, "peer", pid)
	}
	return store.TrustIntro{TokenID: rec.ID, Label: rec.Label, Persona: rec.Persona, Disclosure: rec.Disclosure,
		Expires: rec.Expires, AdmittedAt: now.UTC()}, nil
}
