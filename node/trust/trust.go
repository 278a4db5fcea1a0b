// Package trust is the daemon's trust component: how it decides a peer's
// authentication level (IFP-5). It owns the trust records and their
// in-memory cache, pinned and revoked keys, the introduction tokens it
// minted and those it holds from others (and the admission of their
// proofs), the checks of peers' identity documents (https agent_id,
// did:web) and their fetcher, and the revocation check every inbound
// message passes. Book is the component; New builds it from what it needs.
//
// Levels are decided only on proof this daemon checks itself, never on a
// peer's claim:
//
//   - 1, signed: every libp2p peer. Its messages verify under the key of
//     its peer ID (the door's establish and verify steps), so every peer is at least
//     here.
//   - 0, introduced: the peer proved, with an HMAC over its greeting, that
//     it holds an introduction token the owner minted (`ifaced introduce`).
//     For a libp2p peer this adds nothing to its level, which is already 1;
//     it matters for callers that are not otherwise authenticated (HTTP,
//     later) and as a way to pre-authorize a peer whose key the owner does
//     not know yet: the token's disclosure tier, under its persona, becomes
//     the least the peer is granted (IntroducedTier, Introductions). The first
//     peer to use a token binds it; nobody else can use it after that.
//   - 2, verified: the owner compared the peer's key fingerprint out of
//     band and pinned it (`ifaced trust PEER --verify FINGERPRINT`), or the
//     peer's agent_id is an https URL that serves an IFP-5 identity
//     document listing the peer's key as active (or retired within
//     trust.key_transition).
//   - 3, bound: that document's agent_id is the URL it was fetched from, or
//     the agent_id is a did:web whose DID document lists the key under
//     authentication. Only then is the agent_id reported as established,
//     so only then does a disclosure-map entry under it apply.
//
// The owner can revoke trust in a peer's key (`ifaced trust PEER
// --revoke`): the pin goes, and from then on LevelOf reports no level at
// all and KeyRevoked refuses the peer's messages, until the owner pins the
// key again. The keys of the same identity (linked by successions this
// daemon followed) are revoked with it, and no succession from a revoked
// key is followed (succession.go). A revocation statement received from
// the network refuses its key too, but it is a key lifecycle record,
// shown with who signed it and how it came, never as the owner's.
//
// A level never goes down inside a conversation: the conversation keeps
// the highest grant (the daemon's conv.raise); LevelOf only reports the
// level now.
//
// LevelOf never waits on the network. Identity documents are fetched in
// the background (at most one fetch per peer and four in all), the outcome
// is kept in the peer's trust record with the time and the agent_id it was
// for, and it is fetched again after a day; the level rises on the peer's
// next greeting. `ifaced trust PEER --check` fetches at once (Check).
// Fetches are HTTPS only (redirects to anything else are refused), 10 s at
// most, 1 MiB at most, verified against the system roots and
// trust.ca_file. A fetch that fails does not replace an earlier success
// for the same agent ID: that check stands for a week from when it ran
// (docCheckLifetime), with the failure kept beside it (Info.CheckFailure),
// so a server's outage does not drop a bound peer to level 1; a document
// that is fetched and no longer lists the key replaces it at once. Judging the documents (does
// it list this key, where does a did:web live) is package identity's.
//
// Refused introduction proofs (wrong secret, expired, revoked, bound to
// another peer, never issued here) do not fail the greeting: the peer stays
// at the level it otherwise has, the refusal is logged and kept in its
// trust record, where `ifaced trust` shows it.
//
// Only records that hold something the owner made (a pin, a revocation,
// an admitted introduction) are stored; a stranger's refusals and
// document checks are kept in a bounded memory (strangers.go), and the
// key statements strangers cause are capped (keyrecords.go). Forget
// removes what is held about a key.
package trust

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

var (
	// ErrKeyRevoked: the owner revoked trust in the key of the peer that
	// sent a message.
	ErrKeyRevoked = wire.ErrKeyRevoked
	// ErrFingerprintMismatch: the fingerprint given to pin does not match
	// the peer's key.
	ErrFingerprintMismatch = errors.New("fingerprint does not match the peer's key")
	// ErrNoSuchIntro: no introduction token of that ID was issued here.
	ErrNoSuchIntro = errors.New("no introduction token of that ID was issued by this daemon")
	// ErrOwnIntro: a daemon cannot accept a token it minted itself.
	ErrOwnIntro = errors.New("introduction token was minted by this daemon")
)

// InputError is a trust request refused as given. Field names the input
// at fault the way the control API names it.
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputError(field string, format string, args ...any) error {
	return &InputError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Store is what the component keeps in the daemon's store: trust records,
// issued and held introduction tokens, and (read only) the peer cache, for
// the agent ID a peer last presented. *store.Store is one.
type Store interface {
	Trusts() ([]store.TrustRecord, error)
	PutTrust(store.TrustRecord) error
	IssuedIntro(id string) (store.IssuedIntro, error)
	IssuedIntros() ([]store.IssuedIntro, error)
	PutIssuedIntro(store.IssuedIntro) error
	HeldIntros() ([]store.HeldIntro, error)
	PutHeldIntro(store.HeldIntro) error
	Peer(peerID string) (store.PeerRecord, error)
	DeleteTrust(peerID string) error
	KeyEvents() ([]store.KeyEvent, error)
	PutKeyEvent(e store.KeyEvent, evict ...store.KeyEventRef) error
	DeleteKeyEvents(refs ...store.KeyEventRef) error
}

// Config is the trust.* configuration the component reads.
type Config struct {
	KeyTransition time.Duration // trust.key_transition: how long a retired key still verifies
	IntroExpiry   time.Duration // trust.intro_expiry: default lifetime of minted tokens
	CAFile        string        // trust.ca_file: extra PEM roots for document fetches
	FetchPrivate  bool          // trust.fetch_private: allow fetches to loopback and private addresses
}

// Book is the daemon's trust records, kept in memory over the store so
// that a greeting reads no file, with the tokens it minted (in the store
// only) and the identity document checks running. The tokens other
// daemons minted for this one are a room of their own (Held).
type Book struct {
	store Store
	cfg   Config
	order *conditions.TierOrder
	did   string // this daemon's did:key, the issuer of the tokens it mints
	now   func() time.Time
	log   *slog.Logger
	ctx   context.Context   // ends when the daemon closes; bounds every check
	spawn func(func()) bool // runs a background check unless the daemon is closing; the daemon's Close waits for it

	fetch *docFetcher

	imu sync.Mutex // one admission or change of an issued token at a time
	wmu sync.Mutex // one change of a trust record at a time

	// testAdmitted, when set, runs after an introduction proof is
	// admitted and before the peer's record notes it (tests interleave a
	// revocation there).
	testAdmitted func()

	mu        sync.RWMutex
	recs      map[peer.ID]store.TrustRecord              // persisted records (ownerMade)
	strangers *costlru.Cache[peer.ID, store.TrustRecord] // everyone else's, in memory only (strangers.go)
	held      *Held                                      // tokens other daemons minted for this one (held.go)
	inflight  map[peer.ID]bool                           // identity document checks running
	keys      lifecycle                                  // key statements followed and given (keyrecords.go)
	policy    Policy                                     // names peers the owner made known (known.go)
	asked     *lru.Cache[peer.ID, struct{}]              // peers the owner asked to greet, this run (known.go)
}

// New loads the trust records and held tokens of st. did is this daemon's
// did:key; order is the disclosure tier order in force; policy names the
// peers the owner made known besides this Book's own records (known.go;
// nil: none); ctx ends when the
// daemon closes, and spawn runs a background check (reporting false, and
// not running it, once the daemon is closing) so that the daemon's Close
// waits for it. A record that does not decode is logged and left out: it
// must not keep the daemon from starting. A trust.ca_file that cannot be
// read is logged, and every identity document fetch then fails with that
// error.
func New(ctx context.Context, st Store, cfg Config, order *conditions.TierOrder, policy Policy, did string,
	now func() time.Time, log *slog.Logger, spawn func(func()) bool) *Book {
	b := &Book{store: st, cfg: cfg, order: order, policy: policy, asked: newAsked(), did: did, now: now, log: log, ctx: ctx, spawn: spawn,
		recs: map[peer.ID]store.TrustRecord{}, strangers: newStrangerTrust(), inflight: map[peer.ID]bool{}}
	var err error
	if b.fetch, err = newDocFetcher(cfg.CAFile, cfg.FetchPrivate); err != nil {
		log.Error("identity documents cannot be fetched", "err", err)
	}
	recs, err := st.Trusts()
	if err != nil {
		log.Warn("reading trust records", "err", err)
	}
	for _, r := range recs {
		if pid, err := peer.Decode(r.PeerID); err == nil {
			b.recs[pid] = r
		}
	}
	b.loadLifecycle()
	b.moveStrangersRecords()
	b.held = newHeld(st, did, now, log)
	return b
}

// Held is the introduction tokens other daemons minted for this one.
func (b *Book) Held() *Held { return b.held }

// StrangersFill is how full the strangers' trust records in memory are.
func (b *Book) StrangersFill() costlru.Fill { return b.strangers.Fill() }

// record returns a copy of pid's trust record, stored or (for a
// stranger) in memory; ok reports a stored one.
func (b *Book) record(pid peer.ID) (store.TrustRecord, bool) {
	b.mu.RLock()
	rec, ok := b.recs[pid]
	b.mu.RUnlock()
	if !ok {
		rec, _ = b.strangers.Get(pid)
	}
	rec.Intros = slices.Clone(rec.Intros)
	for _, c := range []**store.DocCheck{&rec.Check, &rec.CheckFailure} {
		if *c != nil {
			cp := **c
			*c = &cp
		}
	}
	return rec, ok
}

// update changes pid's trust record with change, which reports whether it
// changed anything; a change is stored before it is used. A record that
// is not stored and holds nothing the owner made stays in memory
// (strangers.go): no stored record is created just to hold a refusal or a
// check.
func (b *Book) update(pid peer.ID, change func(r *store.TrustRecord) bool) (store.TrustRecord, error) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	rec, stored := b.record(pid)
	rec.PeerID = pid.String()
	if !change(&rec) {
		return rec, nil
	}
	rec.UpdatedAt = b.now().UTC()
	if !stored && !ownerMade(rec) {
		b.strangers.Add(pid, rec, strangerTrustCost(rec))
		return rec, nil
	}
	if err := b.store.PutTrust(rec); err != nil {
		return rec, err
	}
	b.mu.Lock()
	b.recs[pid] = rec
	b.mu.Unlock()
	b.strangers.Remove(pid)
	return rec, nil
}

// LevelOf returns the authentication level this daemon established for
// pid and the agent ID it verified for it ("" when none), from its own
// records and, when given, the greeting pid sent and the agent ID its view
// presents: an introduction proof in the greeting is checked (and the
// token bound on first use), and an https or did:web agentID is checked in
// the background when the record holds no fresh check for it. It never
// waits on the network.
func (b *Book) LevelOf(pid peer.ID, greeting *gossip.Message, agentID string) (conditions.Level, string) {
	now := b.now()
	rec, _ := b.record(pid)
	if how, revoked := b.revokedHere(pid); revoked {
		b.log.Info("peer's key is revoked", "peer", pid, "how", how)
		return conditions.NoLevel, ""
	}
	if greeting != nil {
		if proof, ok := greeting.IntroProof(); ok {
			b.admitIntro(pid, greeting, proof, now)
			rec, _ = b.record(pid)
		}
	}
	b.checkInBackground(pid, agentID, rec, now)
	st := standingOf(rec, agentID, now)
	return st.Level, st.AgentID
}

// standing is what a trust record establishes for a peer.
type standing struct {
	Level   conditions.Level
	AgentID string    // established (level 3) agent ID, or ""
	How     []string  // how the level was reached, for people
	Since   time.Time // when the deciding proof was established
	Revoked bool
}

// standingOf decides a peer's level from its trust record (the zero
// record for a peer without one). agentID is the one the peer presents
// now; "" takes the record's last check as it is. A record holds only its
// own peer's key, so a pinned or revoked fingerprint is always that key's.
func standingOf(rec store.TrustRecord, agentID string, now time.Time) standing {
	st := standing{Level: conditions.Signed}
	if rec.RevokedKey != "" {
		how := "key " + rec.RevokedKey + " revoked by the owner"
		if rec.RevokedWith != "" {
			how += " with " + rec.RevokedWith + ", a key of the same identity (a succession followed between them)"
		}
		return standing{Level: conditions.NoLevel, Revoked: true, Since: rec.RevokedAt, How: []string{how}}
	}
	if rec.PinnedKey != "" {
		st.Level, st.Since = conditions.Verified, rec.PinnedAt
		st.How = append(st.How, "pinned "+rec.PinnedKey)
	}
	if c := rec.Check; c != nil && c.Level >= int(conditions.Verified) && (agentID == "" || agentID == c.AgentID) && checkStands(c, now) {
		if l := conditions.Level(c.Level); l > st.Level {
			st.Level, st.Since = l, c.CheckedAt
		}
		switch {
		case c.Level >= int(conditions.Bound):
			st.AgentID = c.AgentID
			st.How = append(st.How, "bound to "+c.AgentID)
		default:
			st.How = append(st.How, "key listed by the identity document at "+c.URL)
		}
	}
	for _, in := range rec.Intros {
		if now.Before(in.Expires) {
			h := fmt.Sprintf("introduced via token %q", in.Label)
			if in.Disclosure != "" {
				h += fmt.Sprintf(" (%s under %s)", in.Disclosure, orDefaultPersona(in.Persona))
			}
			st.How = append(st.How, h)
			if st.Since.IsZero() {
				st.Since = in.AdmittedAt
			}
		}
	}
	if len(st.How) == 0 {
		st.How = []string{"signed only"}
	}
	return st
}

func orDefaultPersona(p string) string {
	if p == "" {
		return negotiate.DefaultPersona
	}
	return p
}

// KeyRevoked returns an error wrapping ErrKeyRevoked when the owner
// revoked trust in pid's key or a revocation statement revoked it, one
// wrapping wire.ErrKeyRetired when a succession this daemon followed
// retired it and its transition period is over (naming the successor),
// nil otherwise. It is cheap enough to call
// for every incoming message.
func (b *Book) KeyRevoked(pid peer.ID) error {
	if err := b.lifecycleRefusal(pid); err != nil {
		return err
	}
	b.mu.RLock()
	rec, ok := b.recs[pid]
	b.mu.RUnlock()
	if !ok || rec.RevokedKey == "" {
		return nil
	}
	return fmt.Errorf("%w: the owner revoked trust in key %s on %s; ask them to pin it again (`ifaced trust %s --verify %s`) if that was a mistake",
		ErrKeyRevoked, rec.RevokedKey, rec.RevokedAt.UTC().Format(time.RFC3339), pid, rec.RevokedKey)
}

// IntroducedTier is the least disclosure tier pid is granted under persona
// ("" is the default persona) by the introduction tokens it was admitted
// with and that are still valid (unexpired, and not revoked in the
// issued token itself): the highest of their tiers. It reports false when
// no such token names a tier, or when pid's key is revoked.
func (b *Book) IntroducedTier(pid peer.ID, persona string) (string, bool) {
	persona = orDefaultPersona(persona)
	rec, ok := b.record(pid)
	if _, revoked := b.revokedHere(pid); !ok || revoked {
		return "", false
	}
	best := ""
	for _, in := range b.liveIntros(pid, rec.Intros, b.now()) {
		if in.Disclosure == "" || orDefaultPersona(in.Persona) != persona {
			continue
		}
		if best == "" || b.order.AtLeast(in.Disclosure, best) {
			best = in.Disclosure
		}
	}
	return best, best != ""
}

// Introductions are the introduction tokens admitted for pid that are
// still valid (unexpired, the issued token not revoked, pid's key not
// revoked): what each establishes
// for pid in the owner's policy (negotiate.Requester). The persona a
// token names is one the owner established for pid by minting it.
func (b *Book) Introductions(pid peer.ID) []negotiate.Introduction {
	rec, ok := b.record(pid)
	if _, revoked := b.revokedHere(pid); !ok || revoked {
		return nil
	}
	var out []negotiate.Introduction
	for _, in := range b.liveIntros(pid, rec.Intros, b.now()) {
		out = append(out, negotiate.Introduction{Persona: in.Persona, Disclosure: in.Disclosure})
	}
	return out
}

// Info is what this daemon established about one peer.
type Info struct {
	Peer        string           `json:"peer"`
	Fingerprint string           `json:"fingerprint"` // of the peer's key
	Level       conditions.Level `json:"level"`       // -1 when the key is revoked
	How         []string         `json:"how"`
	Since       time.Time        `json:"since,omitzero"`
	AgentID     string           `json:"agent_id,omitempty"` // established (bound) agent ID
	PinnedKey   string           `json:"pinned_key,omitempty"`
	PinnedAt    time.Time        `json:"pinned_at,omitzero"`
	RevokedKey  string           `json:"revoked_key,omitempty"` // the key the owner revoked
	RevokedAt   time.Time        `json:"revoked_at,omitzero"`   // when the owner revoked it, or a statement's revocation was received
	// RevokedBy says who revoked the key, when it is: "owner" (`ifaced
	// trust PEER --revoke`; RevokedWith names the key the owner revoked
	// when this one went with it, as a key of the same identity), or a
	// revocation statement signed by the key itself ("self") or by its
	// successor ("successor"), which RevokedVia (the transport) brought.
	RevokedBy   string `json:"revoked_by,omitempty"`
	RevokedVia  string `json:"revoked_via,omitempty"`
	RevokedWith string `json:"revoked_with,omitempty"`
	// RevokedAlso are the keys of the same identity the owner's revocation
	// of this key revoked with it.
	RevokedAlso []string           `json:"revoked_also,omitempty"`
	Intros      []store.TrustIntro `json:"intros,omitempty"`
	Check       *store.DocCheck    `json:"check,omitempty"`
	// CheckFailure is the last check that fetched nothing while Check, an
	// earlier success, still stands (until CheckStandsUntil).
	CheckFailure     *store.DocCheck `json:"check_failure,omitempty"`
	CheckStandsUntil time.Time       `json:"check_stands_until,omitzero"`
	Refusal          string          `json:"refusal,omitempty"` // why the last introduction proof was refused
	RefusedAt        time.Time       `json:"refused_at,omitzero"`
	// RotatedFrom is the peer whose key this one succeeded, SucceededBy the
	// one that succeeded it, NextKeyDigest the commitment to its next key
	// observed first, and Keys the key statements about it (a succession,
	// revocation or commitment, given or followed, with its class;
	// keyrecords.go).
	RotatedFrom   string      `json:"rotated_from,omitempty"`
	SucceededBy   string      `json:"succeeded_by,omitempty"`
	NextKeyDigest string      `json:"next_key_digest,omitempty"`
	Keys          []KeyRecord `json:"key_events,omitempty"`
	// Class is what the records about the peer are to this daemon:
	// "owner" (a record the owner made: a pin, a revocation, an admitted
	// introduction, or this daemon's own key), "established" (the owner
	// made it known otherwise: a policy entry, a request to greet it) or
	// "stranger" (kept within the strangers' bounds, evicted oldest first).
	Class string `json:"class"`
	// Forgot is what Forget removed (only in its answer).
	Forgot []string `json:"forgot,omitempty"`
}

func (b *Book) info(pid peer.ID, rec store.TrustRecord) Info {
	now := b.now()
	live := rec
	live.Intros = b.liveIntros(pid, rec.Intros, now)
	st := standingOf(live, "", now)
	info := Info{Peer: pid.String(), Level: st.Level, How: st.How, Since: st.Since, AgentID: st.AgentID,
		PinnedKey: rec.PinnedKey, PinnedAt: rec.PinnedAt, RevokedKey: rec.RevokedKey, RevokedAt: rec.RevokedAt,
		Intros: rec.Intros, Check: rec.Check, CheckFailure: rec.CheckFailure, Refusal: rec.Refusal, RefusedAt: rec.RefusedAt}
	if c := rec.Check; c != nil && c.Level >= int(conditions.Verified) {
		info.CheckStandsUntil = c.CheckedAt.Add(docCheckLifetime)
	}
	if pub, err := identity.PublicKeyFromPeerID(pid); err == nil {
		info.Fingerprint = identity.Fingerprint(pub)
	}
	if rec.RevokedKey != "" {
		info.RevokedBy, info.RevokedVia, info.RevokedWith = revokedByOwner, "control API", rec.RevokedWith
		b.mu.RLock()
		for other, r := range b.recs {
			if r.RevokedWith == pid.String() && r.RevokedKey != "" {
				info.RevokedAlso = append(info.RevokedAlso, other.String())
			}
		}
		b.mu.RUnlock()
		slices.Sort(info.RevokedAlso)
	}
	b.lifecycleInfo(pid, &info)
	info.Class = ClassStranger
	switch {
	case ownerMade(rec) || slices.ContainsFunc(info.Keys, func(k KeyRecord) bool { return k.Class == ClassOwner && k.Peer == pid.String() }):
		info.Class = ClassOwner
	case b.Known(pid.String()):
		info.Class = ClassEstablished
	}
	return info
}

// revokedByOwner is Info.RevokedBy for the owner's revocation.
const revokedByOwner = "owner"

// List lists every peer this daemon holds a trust record for, stored or
// in memory, by peer ID. Peers without one are at level 1 (signed only).
func (b *Book) List() []Info {
	b.mu.RLock()
	pids := slices.Collect(maps.Keys(b.recs))
	b.mu.RUnlock()
	for _, pid := range append(b.strangers.Keys(), b.lifecyclePeers()...) {
		if !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	out := make([]Info, 0, len(pids))
	for _, pid := range pids {
		rec, _ := b.record(pid)
		out = append(out, b.info(pid, rec))
	}
	return out
}

// Peer is what this daemon established about pid.
func (b *Book) Peer(pid peer.ID) Info {
	rec, _ := b.record(pid)
	return b.info(pid, rec)
}

// PinKey pins pid's key at level 2 (verified) once the owner compared its
// fingerprint out of band. A fingerprint that is not pid's is refused with
// both shown. Pinning also lifts the owner's earlier revocation of the
// same key (not a revocation statement's: Forget removes that one).
func (b *Book) PinKey(pid peer.ID, fingerprint string) (Info, error) {
	pub, err := identity.PublicKeyFromPeerID(pid)
	if err != nil {
		return Info{}, inputError("peer", "pinning %s: %v", pid, err)
	}
	want := identity.Fingerprint(pub)
	got := normalizeFingerprint(fingerprint)
	if got == "" {
		return Info{}, inputError("verify", "pinning %s: no fingerprint given (want %s… as its owner's `ifaced id` prints it)", pid, want[:len("SHA256:")+4])
	}
	if got != want {
		return Info{}, &InputError{Field: "verify", Err: fmt.Errorf("%w: you gave %s, but %s has key %s; compare again with its owner (`ifaced id` prints theirs) before pinning",
			ErrFingerprintMismatch, got, pid, want)}
	}
	now := b.now().UTC()
	rec, err := b.update(pid, func(r *store.TrustRecord) bool {
		if r.PinnedKey == want && r.RevokedKey == "" {
			return false
		}
		r.PinnedKey, r.PinnedAt = want, now
		r.RevokedKey, r.RevokedAt = "", time.Time{}
		return true
	})
	if err != nil {
		return Info{}, err
	}
	b.keepRecords(pid)
	b.log.Info("pinned peer's key", "peer", pid, "fingerprint", want)
	return b.info(pid, rec), nil
}

// normalizeFingerprint accepts a fingerprint with or without its SHA256:
// prefix, as people copy it.
func normalizeFingerprint(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 7 && strings.EqualFold(s[:7], "SHA256:") {
		s = s[7:]
	}
	if s == "" {
		return ""
	}
	return "SHA256:" + s
}

// RevokeKey revokes trust in pid's key: the pin goes, and from then on the
// peer has no level and its messages are refused (KeyRevoked), until the
// owner pins the key again; no succession from it is followed. The block
// follows the identity: every key linked to pid by successions followed
// here, its successors and the keys it succeeded, is revoked with it
// (RevokedWith names pid), and the answer lists them (Info.RevokedAlso).
func (b *Book) RevokeKey(pid peer.ID) (Info, error) {
	if _, err := identity.PublicKeyFromPeerID(pid); err != nil {
		return Info{}, inputError("peer", "revoking %s: %v", pid, err)
	}
	if err := b.revokeOne(pid, ""); err != nil {
		return Info{}, err
	}
	chain := b.identityChain(pid)
	for _, other := range chain {
		if err := b.revokeOne(other, pid.String()); err != nil {
			return Info{}, fmt.Errorf("revoking %s with %s (a key of the same identity): %w", other, pid, err)
		}
	}
	if len(chain) > 0 {
		b.log.Info("revoked the keys of the same identity with it", "peer", pid, "also", chain)
	}
	return b.Peer(pid), nil
}

// revokeOne revokes pid's key (with, when it goes with another key of the
// same identity). A key the owner revoked by itself stays so.
func (b *Book) revokeOne(pid peer.ID, with string) error {
	pub, err := identity.PublicKeyFromPeerID(pid)
	if err != nil {
		return err
	}
	fp := identity.Fingerprint(pub)
	now := b.now().UTC()
	_, err = b.update(pid, func(r *store.TrustRecord) bool {
		if r.RevokedKey == fp && r.PinnedKey == "" && (r.RevokedWith == "" || r.RevokedWith == with) {
			return false
		}
		if r.RevokedKey == fp && r.RevokedWith == "" {
			with = "" // revoked by itself before: it stays so
		}
		r.PinnedKey, r.PinnedAt = "", time.Time{}
		r.RevokedKey, r.RevokedAt, r.RevokedWith = fp, now, with
		return true
	})
	if err != nil {
		return err
	}
	b.log.Info("revoked trust in peer's key", "peer", pid, "fingerprint", fp, "with", with)
	return nil
}

// identityChain are the keys linked to pid by successions followed here,
// both ways, pid left out.
func (b *Book) identityChain(pid peer.ID) []peer.ID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	seen := map[peer.ID]bool{pid: true}
	todo := []peer.ID{pid}
	var out []peer.ID
	for len(todo) > 0 {
		cur := todo[0]
		todo = todo[1:]
		var linked []peer.ID
		if e, ok := b.keys.succs[cur]; ok && e.Direction == store.KeyReceived {
			if next, err := peer.Decode(e.Successor); err == nil {
				linked = append(linked, next)
			}
		}
		for old, e := range b.keys.succs {
			if e.Direction == store.KeyReceived && e.Successor == cur.String() {
				linked = append(linked, old)
			}
		}
		for _, l := range linked {
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
				todo = append(todo, l)
			}
		}
	}
	slices.Sort(out)
	return out
}
