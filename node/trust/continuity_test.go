package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The key continuity conformance vectors (testdata/continuity-vectors.json):
// the rules of node/wire "Key lifecycle" as sequences of statements a
// receiver observes, in order, with the outcome of each and what holds
// after. Another implementation runs the same file: each step's
// statements are complete, signed JSON.
//
//	go test ./node/trust -run TestContinuityVectors -update   rewrites it

var update = flag.Bool("update", false, "rewrite testdata/continuity-vectors.json from the cases below")

const continuityVectors = "testdata/continuity-vectors.json"

// continuityFile is the vector file.
type continuityFile struct {
	Description string `json:"description"`
	// Now is the receiver's clock for every step; MaxAgeSeconds how old a
	// succession's date may be (the mailbox retention, or the replay
	// window); TransitionSeconds every succession's transition period.
	Now               string                   `json:"now"`
	MaxAgeSeconds     int64                    `json:"max_age_seconds"`
	TransitionSeconds int64                    `json:"transition_seconds"`
	Keys              map[string]continuityKey `json:"keys"`
	Cases             []continuityCase         `json:"cases"`
}

type continuityKey struct {
	Seed   string `json:"seed"` // hex, 32 bytes: SHA-256 of "ifaced continuity vector key " + name
	KeyID  string `json:"key_id"`
	PeerID string `json:"peer_id"`
	// NextKeyDigest is identity.NextKeyDigest of the key.
	NextKeyDigest string `json:"next_key_digest"`
}

type continuityCase struct {
	Name string `json:"name"`
	Rule string `json:"rule"`
	// Pinned are keys the owner pinned before the first step (met, and
	// made known: level 2); Met keys whose view the receiver holds
	// (met, not known).
	Pinned []string         `json:"pinned,omitempty"`
	Met    []string         `json:"met,omitempty"`
	Steps  []continuityStep `json:"steps"`
	// After: each key's refusal code for a message it signs ("" taken),
	// and its level (-1 none).
	AfterRefused map[string]string `json:"after_refused"`
	AfterLevel   map[string]int    `json:"after_level,omitempty"`
}

// continuityStep is one observation: a message signed by Carrier carrying
// the statements (at most one of each kind), or the owner revoking a key.
// Expect is "followed" or the wire code of the refusal; OwnerRevokes
// lists, in AlsoRevoked, the keys revoked with it.
type continuityStep struct {
	Carrier      string          `json:"carrier,omitempty"`
	Commitment   json.RawMessage `json:"key_commitment,omitempty"`
	Succession   json.RawMessage `json:"key_succession,omitempty"`
	Revocation   json.RawMessage `json:"key_revocation,omitempty"`
	OwnerRevokes string          `json:"owner_revokes,omitempty"`
	Expect       string          `json:"expect"`
	AlsoRevoked  []string        `json:"also_revoked,omitempty"`
}

const followed = "followed"

var vectorNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

const (
	vectorMaxAge     = 7 * 24 * time.Hour
	vectorTransition = time.Hour
)

func vectorIdentity(t *testing.T, name string) *identity.Identity {
	t.Helper()
	seed := sha256.Sum256([]byte("ifaced continuity vector key " + name))
	id, err := identity.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// continuityCases builds the cases: the statements are made here, signed
// by the vector keys.
func continuityCases(t *testing.T) []continuityCase {
	k := func(name string) *identity.Identity { return vectorIdentity(t, name) }
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	succ := func(old, next string, date time.Time, after string) json.RawMessage {
		var pub []byte
		if after != "" {
			pub = k(after).PublicKey()
		}
		s, err := identity.NewCommittedSuccession(k(old), k(next), pub, date, vectorTransition)
		if err != nil {
			t.Fatal(err)
		}
		return raw(s)
	}
	rev := func(signer, revoked string, date time.Time) json.RawMessage {
		r, err := identity.NewRevocation(k(signer), k(revoked).KeyID(), date, "")
		if err != nil {
			t.Fatal(err)
		}
		return raw(r)
	}
	commit := func(key, next string, date time.Time) json.RawMessage {
		c, err := identity.NewCommitment(k(key), k(next).PublicKey(), date)
		if err != nil {
			t.Fatal(err)
		}
		return raw(c)
	}
	now := vectorNow
	return []continuityCase{
		{Name: "succession followed", Rule: "a succession from a key met here, carried by its new key, is followed; the new key takes the old one's pin",
			Pinned:       []string{"A"},
			Steps:        []continuityStep{{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed}},
			AfterRefused: map[string]string{"A": "", "B": ""}, AfterLevel: map[string]int{"B": 2}},
		{Name: "a retired key's back-dated revocation leaves its successor", Rule: "once A→B is followed, a revocation of A, however dated and whoever carries it, revokes A only",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed},
				{Carrier: "S", Revocation: rev("A", "A", now.Add(-30*24*time.Hour)), Expect: followed},
			},
			AfterRefused: map[string]string{"A": "key_revoked", "B": ""}, AfterLevel: map[string]int{"A": -1, "B": 2}},
		{Name: "a retired key makes no second succession", Rule: "a key has one successor",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed},
				{Carrier: "C", Succession: succ("A", "C", now, ""), Expect: "key_statement_refused"},
			},
			AfterRefused: map[string]string{"B": "", "C": ""}, AfterLevel: map[string]int{"B": 2, "C": 1}},
		{Name: "a revocation observed first blocks a succession dated before it", Rule: "what a revocation does to successions is decided by the order observed, not by dates",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "A", Revocation: rev("A", "A", now), Expect: followed},
				{Carrier: "B", Succession: succ("A", "B", now.Add(-time.Hour), ""), Expect: "key_revoked"},
			},
			AfterRefused: map[string]string{"A": "key_revoked", "B": ""}, AfterLevel: map[string]int{"A": -1, "B": 1}},
		{Name: "a key the owner revoked passes nothing", Rule: "a succession from a key the owner revoked is refused, whenever it is dated",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{OwnerRevokes: "A", Expect: followed},
				{Carrier: "B", Succession: succ("A", "B", now.Add(-time.Hour), ""), Expect: "key_revoked"},
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: "key_revoked"},
			},
			AfterRefused: map[string]string{"A": "key_revoked", "B": ""}, AfterLevel: map[string]int{"A": -1, "B": 1}},
		{Name: "the owner's revocation follows the identity", Rule: "the owner's revocation of a key extends along the successions followed, both ways; no succession from them is followed",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed},
				{Carrier: "C", Succession: succ("B", "C", now, ""), Expect: followed},
				{OwnerRevokes: "B", Expect: followed, AlsoRevoked: []string{"A", "C"}},
				{Carrier: "D", Succession: succ("C", "D", now, ""), Expect: "key_revoked"},
			},
			AfterRefused: map[string]string{"A": "key_revoked", "B": "key_revoked", "C": "key_revoked", "D": ""},
			AfterLevel:   map[string]int{"A": -1, "B": -1, "C": -1, "D": 1}},
		{Name: "a revocation signed by the successor", Rule: "the successor may revoke the key it succeeded; the successor keeps what it was given",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed},
				{Carrier: "B", Revocation: rev("B", "A", now), Succession: succ("A", "B", now, ""), Expect: followed},
			},
			AfterRefused: map[string]string{"A": "key_revoked", "B": ""}, AfterLevel: map[string]int{"A": -1, "B": 2}},
		{Name: "a commitment binds the succession", Rule: "pre-rotation: a succession from a key to any key but the one it committed to is refused",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "A", Commitment: commit("A", "B", now.Add(-time.Hour)), Expect: followed},
				{Carrier: "T", Succession: succ("A", "T", now, ""), Expect: "key_statement_refused"},
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: followed},
			},
			AfterRefused: map[string]string{"B": "", "T": ""}, AfterLevel: map[string]int{"B": 2, "T": 1}},
		{Name: "the first commitment observed binds", Rule: "a later, different commitment from the same key is refused; the same one again is taken",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "A", Commitment: commit("A", "B", now.Add(-time.Hour)), Expect: followed},
				{Carrier: "A", Commitment: commit("A", "T", now), Expect: "key_statement_refused"},
				{Carrier: "A", Commitment: commit("A", "B", now.Add(-time.Hour)), Expect: followed},
				{Carrier: "T", Succession: succ("A", "T", now, ""), Expect: "key_statement_refused"},
			},
			AfterRefused: map[string]string{"A": "", "T": ""}, AfterLevel: map[string]int{"A": 2, "T": 1}},
		{Name: "a succession commits to the key after it", Rule: "a succession's next_key_digest is the new key's commitment",
			Pinned: []string{"A"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, "C"), Expect: followed},
				{Carrier: "T", Succession: succ("B", "T", now, ""), Expect: "key_statement_refused"},
				{Carrier: "B", Commitment: commit("B", "T", now), Expect: "key_statement_refused"},
				{Carrier: "C", Succession: succ("B", "C", now, ""), Expect: followed},
			},
			AfterRefused: map[string]string{"C": "", "T": ""}, AfterLevel: map[string]int{"C": 2, "T": 1}},
		{Name: "a commitment travels signed by its own key", Rule: "a commitment carried by any other key is refused",
			Pinned:       []string{"A"},
			Steps:        []continuityStep{{Carrier: "S", Commitment: commit("A", "B", now), Expect: "wrong_key"}},
			AfterRefused: map[string]string{"A": ""}, AfterLevel: map[string]int{"A": 2}},
		{Name: "a stale succession", Rule: "dates bound freshness: a succession older than the maximum age is refused",
			Pinned:       []string{"A"},
			Steps:        []continuityStep{{Carrier: "B", Succession: succ("A", "B", now.Add(-vectorMaxAge-time.Hour), ""), Expect: "replay"}},
			AfterRefused: map[string]string{"A": "", "B": ""}, AfterLevel: map[string]int{"A": 2, "B": 1}},
		{Name: "a statement dated ahead", Rule: "dates bound freshness: a revocation more than 5 minutes ahead is refused",
			Pinned:       []string{"A"},
			Steps:        []continuityStep{{Carrier: "A", Revocation: rev("A", "A", now.Add(time.Hour)), Expect: "replay"}},
			AfterRefused: map[string]string{"A": ""}, AfterLevel: map[string]int{"A": 2}},
		{Name: "a key never met", Rule: "statements about a key the receiver never met are refused",
			Met: []string{"M"},
			Steps: []continuityStep{
				{Carrier: "B", Succession: succ("A", "B", now, ""), Expect: "key_statement_refused"},
				{Carrier: "A", Revocation: rev("A", "A", now), Expect: "key_statement_refused"},
				{Carrier: "N", Succession: succ("M", "N", now, ""), Expect: followed},
			},
			AfterRefused: map[string]string{"A": "", "N": ""}, AfterLevel: map[string]int{"A": 1, "N": 1}},
	}
}

// TestContinuityVectors runs every case of the vector file against a Book
// of its own, as the daemon's door would: for each step, the statements
// are checked (commitment, succession, revocation) and, when all pass,
// followed in that order.
func TestContinuityVectors(t *testing.T) {
	if *update {
		writeContinuityVectors(t)
	}
	raw, err := os.ReadFile(continuityVectors)
	if err != nil {
		t.Fatal(err)
	}
	var f continuityFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, f.Now)
	if err != nil {
		t.Fatal(err)
	}
	peers := map[string]peer.ID{}
	for name, k := range f.Keys {
		id := vectorIdentity(t, name)
		if hex.EncodeToString(mustSeed(name)) != k.Seed || id.KeyID() != k.KeyID || id.PeerID().String() != k.PeerID ||
			identity.NextKeyDigest(id.PublicKey()) != k.NextKeyDigest {
			t.Fatalf("vector key %s does not derive from its seed as written", name)
		}
		peers[name] = id.PeerID()
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			b := openBookAt(t, st, Config{KeyTransition: time.Hour}, func() time.Time { return now })
			met := map[peer.ID]bool{}
			for _, name := range c.Pinned {
				id := vectorIdentity(t, name)
				if _, err := b.PinKey(id.PeerID(), id.Fingerprint()); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range c.Met {
				met[peers[name]] = true
			}
			isMet := func(p peer.ID) bool { owner, _ := b.OwnerStanding(p); return owner || met[p] }
			isKnown := func(p peer.ID) bool { owner, _ := b.OwnerStanding(p); return owner }
			for i, s := range c.Steps {
				got, also := runStep(t, b, peers, s, isMet, isKnown, time.Duration(f.MaxAgeSeconds)*time.Second)
				if got != s.Expect {
					t.Errorf("step %d: %s, want %s", i+1, got, s.Expect)
				}
				if !slices.Equal(also, s.AlsoRevoked) {
					t.Errorf("step %d: also revoked %v, want %v", i+1, also, s.AlsoRevoked)
				}
			}
			for name, want := range c.AfterRefused {
				got := ""
				if err := b.KeyRevoked(peers[name]); err != nil {
					got = string(wire.CodeOf(err))
				}
				if got != want {
					t.Errorf("after: a message %s signs is refused with %q, want %q", name, got, want)
				}
			}
			for name, want := range c.AfterLevel {
				if got := b.Peer(peers[name]).Level; got != conditions.Level(want) {
					t.Errorf("after: %s is at level %d, want %d", name, got, want)
				}
			}
		})
	}
}

func mustSeed(name string) []byte {
	s := sha256.Sum256([]byte("ifaced continuity vector key " + name))
	return s[:]
}

// runStep observes one step as the daemon's door and act step would.
func runStep(t *testing.T, b *Book, peers map[string]peer.ID, s continuityStep, met, known Met, maxAge time.Duration) (string, []string) {
	t.Helper()
	if s.OwnerRevokes != "" {
		info, err := b.RevokeKey(peers[s.OwnerRevokes])
		if err != nil {
			return string(wire.CodeOf(err)), nil
		}
		var also []string
		for _, p := range info.RevokedAlso {
			for name, pid := range peers {
				if pid.String() == p {
					also = append(also, name)
				}
			}
		}
		slices.Sort(also)
		return followed, also
	}
	carrier := peers[s.Carrier]
	var (
		com  *identity.Commitment
		succ *identity.Succession
		rev  *identity.Revocation
		err  error
	)
	if s.Commitment != nil {
		if com, err = identity.DecodeCommitment(s.Commitment); err != nil {
			return string(wire.CodeOf(err)), nil
		}
	}
	if s.Succession != nil {
		if succ, err = identity.DecodeSuccession(s.Succession); err != nil {
			return string(wire.CodeOf(err)), nil
		}
	}
	if s.Revocation != nil {
		if rev, err = identity.DecodeRevocation(s.Revocation); err != nil {
			return string(wire.CodeOf(err)), nil
		}
	}
	check := func() error {
		if com != nil {
			if err := b.CheckCommitment(com, carrier); err != nil {
				return err
			}
		}
		if succ != nil {
			if err := succ.Verify(); err != nil {
				return err
			}
			if rev == nil || rev.Signer != succ.NewKeyID {
				if err := b.CheckSuccession(succ, carrier, met, known, maxAge); err != nil {
					return err
				}
			}
		}
		if rev != nil {
			return b.CheckRevocation(rev, succ, met)
		}
		return nil
	}
	if err := check(); err != nil {
		return string(wire.CodeOf(err)), nil
	}
	if com != nil {
		if _, err := b.FollowCommitment(com, "vector"); err != nil {
			t.Fatal(err)
		}
	}
	if succ != nil && b.CheckSuccession(succ, carrier, met, known, maxAge) == nil {
		if _, _, err := b.FollowSuccession(succ, "vector"); err != nil {
			t.Fatal(err)
		}
	}
	if rev != nil {
		if _, _, err := b.FollowRevocation(rev, succ, "vector"); err != nil {
			t.Fatal(err)
		}
	}
	return followed, nil
}

func writeContinuityVectors(t *testing.T) {
	f := continuityFile{
		Description: "Key continuity conformance vectors (node/wire \"Key lifecycle\"). Each case starts a receiver afresh at `now`: the keys in pinned are pinned by its owner (met, made known, level 2), those in met are met only. Each step is one message signed by `carrier` carrying the statements given (checked commitment, succession, revocation, then followed in that order when all pass), or the owner revoking a key; `expect` is \"followed\" or the wire code of the refusal. after_refused gives the code refusing a message each key signs afterwards (\"\" when taken), after_level its authentication level (-1: none).",
		Now:         vectorNow.Format(time.RFC3339), MaxAgeSeconds: int64(vectorMaxAge / time.Second), TransitionSeconds: int64(vectorTransition / time.Second),
		Keys:  map[string]continuityKey{},
		Cases: continuityCases(t),
	}
	for _, c := range f.Cases {
		names := append(append([]string{}, c.Pinned...), c.Met...)
		for _, s := range c.Steps {
			names = append(names, s.Carrier, s.OwnerRevokes)
			names = append(names, s.AlsoRevoked...)
		}
		for n := range c.AfterRefused {
			names = append(names, n)
		}
		for _, n := range names {
			if n == "" {
				continue
			}
			id := vectorIdentity(t, n)
			f.Keys[n] = continuityKey{Seed: hex.EncodeToString(mustSeed(n)), KeyID: id.KeyID(), PeerID: id.PeerID().String(),
				NextKeyDigest: identity.NextKeyDigest(id.PublicKey())}
		}
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(continuityVectors), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(continuityVectors, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
