package keys

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ifaced/ifaced/negotiate"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle, the giving side: this daemon's own key rotated or
// revoked.
//
// Decision: the key commands (`ifaced key rotate`, `ifaced key revoke`)
// work on the data directory while the daemon is stopped (RotateKey,
// RevokeOldKey, PublishRevocation; the store's lock tells them a daemon
// is running, and they say to stop it). Every component holds the libp2p
// host, whose identity is the key, so swapping the key in a running
// daemon would mean rebuilding all of them: a restart does exactly that,
// and nothing else is needed. The daemon does not keep a listener on the
// old peer ID: its old key verifies at the peers for the transition period
// (messages it signed before the rotation, mail still waiting at relays),
// which is what the transition is for.
//
// On its next start the daemon finds the statements it gave that are not
// delivered to everyone yet (keyNotices): it serves its identity document
// with the old key listed as retired (retired_date the succession's
// date), and sends each statement to every peer in its peer cache — in a
// conversation where the peer is reachable, else as mail left at the
// peer's mailbox relays — remembering whom it reached, so that a restart
// sends it only to the others. Its DHT provider records and GossipSub
// announcements are made under the new peer ID from the start, as always.

// Pre-rotation (KERI-style): `ifaced key commit-next --out FILE`
// (CommitNextKey) makes the key that will succeed this daemon's key, writes
// it to FILE for the owner to keep offline, and records the commitment
// statement (signed by the current key) to its digest. The daemon sends
// the commitment to its peers in every greeting (a key_commitment part)
// and with the statements it delivers at start; a peer that
// observed it refuses a succession to any other key, so whoever steals
// the current key cannot rotate the identity away. `ifaced key rotate
// --next-key FILE` rotates to the committed key (RotateKey refuses any
// other while a commitment stands), and `--commit-next FILE2` commits, in
// the succession statement itself, to the key after it.

// Rotation is what RotateKey did.
type Rotation struct {
	Old        peer.ID              `json:"old"`
	New        peer.ID              `json:"new"`
	Statement  *identity.Succession `json:"statement"`
	RetiredKey string               `json:"retired_key"` // where the old key file was moved
	// Committed is the file holding the key after the new one, when the
	// rotation committed to it (RotateOptions.CommitNext).
	Committed string `json:"committed,omitempty"`
}

// RotateOptions are the owner's choices for RotateKey.
type RotateOptions struct {
	// NextKey is the file holding the key to rotate to (the one `ifaced
	// key commit-next` wrote); "" makes a new key, which is refused while
	// this daemon's key has a commitment to another.
	NextKey string
	// CommitNext, when set, is where a new key after the new one is
	// written (mode 0600, never overwritten): the succession statement
	// commits to it, and so does the new key's commitment statement.
	CommitNext string
}

// ErrCommitted: the daemon's key committed to a next key, and the
// rotation names another (or none).
var ErrCommitted = errors.New("this daemon's key committed to its next key")

// ErrDaemonRunning: a key command needs the daemon stopped.
var ErrDaemonRunning = errors.New("the daemon is running")

// openStopped opens the store of a daemon that is not running.
func openStopped(h config.Home) (*store.Store, error) {
	st, err := store.Open(filepath.Join(h.Dir, "ifaced.db"))
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("%w: stop it first (the key is the daemon's identity, and it takes the new one at its next start): %w", ErrDaemonRunning, err)
	}
	return st, err
}

// RotateKey replaces the daemon's key in h with the next one: the key in
// o.NextKey, or a new one when the current key committed to none. It
// makes the succession statement (signed by both keys, dated now, with
// the transition period, committing to the key in o.CommitNext when set),
// records it in the store as given, moves the old key to RetiredKeyPath
// and puts the new one in its place. The daemon must be stopped; its next
// start delivers the statement.
func RotateKey(h config.Home, transition time.Duration, now time.Time, o RotateOptions) (*Rotation, error) {
	old, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return nil, err
	}
	st, err := openStopped(h)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	commit, committed, err := givenCommitment(st, old.PeerID())
	if err != nil {
		return nil, err
	}
	var next *identity.Identity
	switch {
	case o.NextKey != "":
		if next, err = identity.LoadKey(o.NextKey); err != nil {
			return nil, fmt.Errorf("rotating the key: --next-key: %w", err)
		}
		if committed && !identity.Commits(commit.NextKeyDigest, next.KeyID()) {
			return nil, fmt.Errorf("rotating the key: %w (next_key_digest %s, on %s), and %s holds another key (%s, digest %s): peers that saw the commitment would refuse the rotation; give the file `ifaced key commit-next` wrote",
				ErrCommitted, commit.NextKeyDigest, commit.Date.UTC().Format(time.RFC3339), o.NextKey, next.PeerID(), identity.NextKeyDigest(next.PublicKey()))
		}
		if next.PeerID() == old.PeerID() {
			return nil, fmt.Errorf("rotating the key: --next-key %s holds this daemon's current key", o.NextKey)
		}
	case committed:
		return nil, fmt.Errorf("rotating the key: %w (next_key_digest %s, on %s): rotate to it with --next-key FILE, the file `ifaced key commit-next` wrote; peers that saw the commitment refuse a rotation to any other key",
			ErrCommitted, commit.NextKeyDigest, commit.Date.UTC().Format(time.RFC3339))
	default:
		if next, err = identity.Generate(nil); err != nil {
			return nil, err
		}
	}
	var after *identity.Identity
	if o.CommitNext != "" {
		if after, err = identity.Generate(nil); err != nil {
			return nil, err
		}
	}
	var afterPub ed25519.PublicKey
	if after != nil {
		afterPub = after.PublicKey()
	}
	s, err := identity.NewCommittedSuccession(old, next, afterPub, now, transition)
	if err != nil {
		return nil, fmt.Errorf("rotating the key: %w", err)
	}
	pending := h.KeyPath() + ".next"
	if err := os.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rotating the key: %w", err)
	}
	if err := identity.SaveKey(pending, next); err != nil {
		return nil, err
	}
	retired := h.RetiredKeyPath(old.PeerID())
	if err := os.MkdirAll(filepath.Dir(retired), 0o700); err != nil {
		return nil, fmt.Errorf("rotating the key: %w", err)
	}
	if after != nil {
		// The key after the next first: a commitment is never recorded
		// to a key nobody holds.
		if err := identity.SaveKey(o.CommitNext, after); err != nil {
			return nil, fmt.Errorf("rotating the key: --commit-next: %w", err)
		}
		c, err := identity.NewCommitment(next, afterPub, now)
		if err != nil {
			return nil, fmt.Errorf("rotating the key: %w", err)
		}
		if err := putGivenCommitment(st, next.PeerID(), c, "ifaced key rotate --commit-next"); err != nil {
			return nil, err
		}
	}
	raw, _ := json.Marshal(s)
	// The statement first: a crash after it leaves the old key in place
	// and a statement nobody is sent (keyNotices sends only the statement
	// whose successor is the daemon's key), and running rotate again
	// replaces it.
	if err := st.PutKeyEvent(store.KeyEvent{Kind: store.KeySuccession, Direction: store.KeyGiven, Peer: old.PeerID().String(),
		Successor: next.PeerID().String(), Date: s.DateTime(), Until: s.Until(), Statement: raw, NextKeyDigest: s.NextKeyDigest,
		At: now.UTC(), Note: "ifaced key rotate"}); err != nil {
		return nil, err
	}
	if err := os.Rename(h.KeyPath(), retired); err != nil {
		return nil, fmt.Errorf("rotating the key: moving the old key aside: %w", err)
	}
	if err := os.Rename(pending, h.KeyPath()); err != nil {
		return nil, fmt.Errorf("rotating the key: putting the new key in place (the old one is at %s): %w", retired, err)
	}
	return &Rotation{Old: old.PeerID(), New: next.PeerID(), Statement: s, RetiredKey: retired, Committed: o.CommitNext}, nil
}

// CommitNextKey makes the key that will succeed the daemon's key in h,
// writes it to out (mode 0600, never overwritten) for the owner to keep
// offline, and records the commitment statement to its digest, signed by
// the current key. A commitment already made for the current key is
// replaced only when replace is set: peers that observed the first one
// refuse the new one (and a rotation to its key) until their owners
// forget it. The daemon must be stopped; its next start sends it.
func CommitNextKey(h config.Home, out string, replace bool, now time.Time) (*identity.Commitment, error) {
	cur, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return nil, err
	}
	st, err := openStopped(h)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	prev, committed, err := givenCommitment(st, cur.PeerID())
	if err != nil {
		return nil, err
	}
	if committed && !replace {
		return nil, fmt.Errorf("committing to a next key: %w already (next_key_digest %s, on %s); rotate to it with `ifaced key rotate --next-key FILE`; --replace makes another, which peers that saw this one refuse",
			ErrCommitted, prev.NextKeyDigest, prev.Date.UTC().Format(time.RFC3339))
	}
	next, err := identity.Generate(nil)
	if err != nil {
		return nil, err
	}
	// The key first: a commitment is never recorded to a key nobody holds.
	if err := identity.SaveKey(out, next); err != nil {
		return nil, fmt.Errorf("committing to a next key: %w", err)
	}
	c, err := identity.NewCommitment(cur, next.PublicKey(), now)
	if err != nil {
		return nil, err
	}
	if err := putGivenCommitment(st, cur.PeerID(), c, "ifaced key commit-next"); err != nil {
		return nil, err
	}
	return c, nil
}

// givenCommitment is the commitment this daemon gave for its key pid.
func givenCommitment(st *store.Store, pid peer.ID) (store.KeyEvent, bool, error) {
	evs, err := st.KeyEvents()
	if err != nil {
		return store.KeyEvent{}, false, err
	}
	for _, e := range evs {
		if e.Kind == store.KeyCommitment && e.Direction == store.KeyGiven && e.Peer == pid.String() {
			return e, true, nil
		}
	}
	return store.KeyEvent{}, false, nil
}

func putGivenCommitment(st *store.Store, pid peer.ID, c *identity.Commitment, note string) error {
	raw, _ := json.Marshal(c)
	return st.PutKeyEvent(store.KeyEvent{Kind: store.KeyCommitment, Direction: store.KeyGiven, Peer: pid.String(),
		Date: c.DateTime(), Statement: raw, NextKeyDigest: c.NextKeyDigest, At: c.DateTime(), Note: note})
}

// RevocationStatement makes a revocation statement of the key in h, signed
// by that key and dated now, for the owner to keep offline (`ifaced key
// revocation-statement`): published later (PublishRevocation), it revokes
// the key at every peer that receives it, and a peer that receives it
// before any succession from the key follows none after it. A succession
// a peer followed before it is not undone (what stops a thief's rotation
// is pre-rotation: CommitNextKey). It needs no store, so the daemon may be
// running.
func RevocationStatement(keyPath, reason string, now time.Time) (*identity.Revocation, error) {
	id, err := identity.LoadKey(keyPath)
	if err != nil {
		return nil, err
	}
	return identity.NewRevocation(id, id.KeyID(), now, reason)
}

// RevokeOldKey revokes a key this daemon's key succeeded (old; "" for the
// one it succeeded last): the statement is signed by the current key and
// travels with the succession statement. The daemon must be stopped; its
// next start delivers the statement.
func RevokeOldKey(h config.Home, old peer.ID, reason string, now time.Time) (*identity.Revocation, error) {
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return nil, err
	}
	st, err := openStopped(h)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	evs, err := st.KeyEvents()
	if err != nil {
		return nil, err
	}
	var succ *store.KeyEvent
	for i, e := range evs {
		if e.Kind == store.KeySuccession && e.Direction == store.KeyGiven && e.Successor == id.PeerID().String() &&
			(old == "" || e.Peer == old.String()) {
			succ = &evs[i]
		}
	}
	if succ == nil {
		if old == "" {
			return nil, fmt.Errorf("revoking: this daemon's key %s succeeded no key here; to revoke a key you no longer hold, publish the revocation statement prepared for it (`ifaced key revoke --statement FILE`)", id.PeerID())
		}
		return nil, fmt.Errorf("revoking %s: this daemon's key %s is not its successor, so it may not revoke it; publish the revocation statement prepared for it (`ifaced key revoke --statement FILE`)", old, id.PeerID())
	}
	s, err := identity.DecodeSuccession(succ.Statement)
	if err != nil {
		return nil, err
	}
	r, err := identity.NewRevocation(id, s.OldKeyID, now, reason)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(r)
	if err := st.PutKeyEvent(store.KeyEvent{Kind: store.KeyRevocation, Direction: store.KeyGiven, Peer: succ.Peer,
		Successor: id.PeerID().String(), Date: r.DateTime(), Statement: raw, Succession: succ.Statement, Reason: reason,
		At: now.UTC(), Note: "ifaced key revoke"}); err != nil {
		return nil, err
	}
	return r, nil
}

// PublishRevocation records a revocation statement (one prepared with
// RevocationStatement, signed by the key it revokes) for this daemon to
// deliver at its next start to every peer in its cache. It must verify.
func PublishRevocation(h config.Home, raw []byte, now time.Time) (*identity.Revocation, error) {
	r, err := identity.DecodeRevocation(raw)
	if err != nil {
		return nil, err
	}
	if err := r.Verify(nil); err != nil {
		return nil, fmt.Errorf("publishing a revocation: %w (a prepared statement is signed by the key it revokes; to revoke a key this daemon succeeded, run `ifaced key revoke` without --statement)", err)
	}
	pid, err := r.RevokedPeer()
	if err != nil {
		return nil, err
	}
	st, err := openStopped(h)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	canon, _ := json.Marshal(r)
	if err := st.PutKeyEvent(store.KeyEvent{Kind: store.KeyRevocation, Direction: store.KeyGiven, Peer: pid.String(),
		Date: r.DateTime(), Statement: canon, Reason: r.Reason, At: now.UTC(), Note: "ifaced key revoke --statement"}); err != nil {
		return nil, err
	}
	return r, nil
}

func StatementPart(name string, v any) gossip.Part {
	return gossip.Part{ContentType: "application/json", Name: name, Content: negotiate.MustJSONValue(v)}
}

// CommitmentParts are the parts every greeting this daemon sends carries:
// its key's commitment to its next key, when it made one (pre-rotation),
// so that every peer it meets observes it before any succession.
func CommitmentParts(t *trust.Book, self peer.ID) []gossip.Part {
	e, ok := t.Commitment(self)
	if !ok || e.Direction != store.KeyGiven {
		return nil
	}
	c, err := identity.DecodeCommitment(e.Statement)
	if err != nil {
		return nil
	}
	// Member by member (every member is ASCII): this rides on every
	// greeting, and a round trip through encoding/json costs more.
	return []gossip.Part{{ContentType: "application/json", Name: PartKeyCommitment, Content: map[string]any{
		"type": c.Type, "key_id": c.KeyID, "next_key_digest": c.NextKeyDigest, "date": c.Date, "sig": c.Sig}}}
}
