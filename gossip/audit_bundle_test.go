package gossip

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/ifaced/ifaced/identity"
)

// exportBundle exports sel from p's log and returns it as JSON.
func (p *provenLog) exportBundle(t *testing.T, sel BundleSelect) []byte {
	t.Helper()
	b, err := ExportBundle(p.dir, sel, p.trusted)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestBundleVerifiesAlone: a conversation's bundle verifies with nothing
// but itself: each record in its checkpoint, the checkpoint signed by the
// daemon's key, each message signed by the side that sent it.
func TestBundleVerifiesAlone(t *testing.T) {
	p := newProvenLog(t, 6)
	raw := p.exportBundle(t, BundleSelect{ConversationID: p.conv})
	rep, err := VerifyBundle(raw, nil)
	if err != nil {
		t.Fatalf("verify-bundle: %v", err)
	}
	if len(rep.Records) != 6 || len(rep.Checkpoints) != 1 || len(rep.Keys) != 1 || rep.Keys[0] != p.owner.DID() {
		t.Fatalf("report %+v, want 6 records in 1 checkpoint signed by %s", rep, p.owner.DID())
	}
	for i, e := range rep.Records {
		want := map[Direction]string{Received: "peer", Sent: "daemon"}[e.Direction]
		if e.Signature != want {
			t.Errorf("record %d (%s): signature %q, want %q", i, e.Direction, e.Signature, want)
		}
	}
	// Pinned to the daemon's key it verifies; pinned to another, not.
	if _, err := VerifyBundle(raw, p.trusted); err != nil {
		t.Errorf("pinned to the daemon's key: %v", err)
	}
	other, _ := identity.Generate(nil)
	if _, err := VerifyBundle(raw, func(d string) bool { return d == other.DID() }); !errors.Is(err, ErrBundleInvalid) {
		t.Errorf("pinned to another key: %v, want invalid", err)
	}
	// One message's bundle: only that record.
	rec := p.exportBundle(t, BundleSelect{MessageID: "msg:conv01JNTP8R1S3X4V5W6Y7Z8A9BCE-3"})
	if rep, err := VerifyBundle(rec, nil); err != nil || len(rep.Records) != 1 || rep.Records[0].MessageID != "msg:conv01JNTP8R1S3X4V5W6Y7Z8A9BCE-3" {
		t.Fatalf("one message's bundle: %+v, %v", rep, err)
	}
	if _, err := ExportBundle(p.dir, BundleSelect{ConversationID: "conv:none"}, p.trusted); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an unknown conversation: %v, want not found", err)
	}
}

// TestBundleTampering: a changed bundle is refused, and the failure says
// which part and what.
func TestBundleTampering(t *testing.T) {
	p := newProvenLog(t, 6)
	// A second conversation in the same log, to take a record from.
	a := p.open(t)
	p.conv = "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF"
	p.record(t, a, 1, 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	other := p.exportBundle(t, BundleSelect{ConversationID: p.conv})
	p.conv = auditConvID
	stranger, _ := identity.Generate(nil)
	cases := []struct {
		name   string
		tamper func(b *Bundle)
		want   []string
	}{
		{"a message from another conversation", func(b *Bundle) {
			var o Bundle
			if err := json.Unmarshal(other, &o); err != nil {
				t.Fatal(err)
			}
			r := o.Records[0]
			r.Checkpoint = len(b.Checkpoints)
			b.Checkpoints = append(b.Checkpoints, o.Checkpoints...)
			b.Records = append(b.Records, r)
		}, []string{"record 6", "another conversation", "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF"}},
		{"a record changed", func(b *Bundle) {
			b.Records[2].Record = strings.Replace(b.Records[2].Record, "Message 3", "Message 4", 1)
		}, []string{"record 2", "inclusion proof", "changed"}},
		{"a record moved to another leaf", func(b *Bundle) {
			b.Records[1].Leaf = b.Records[2].Leaf
		}, []string{"record 1", "inclusion proof"}},
		{"a record removed from its proof", func(b *Bundle) {
			b.Records[1].Proof = b.Records[1].Proof[1:]
		}, []string{"record 1", "inclusion proof"}},
		{"a checkpoint re-signed by another key", func(b *Bundle) {
			c, _, err := auditproof.Open([]byte(b.Checkpoints[0]), func(string) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			note, err := auditproof.Sign(c, stranger)
			if err != nil {
				t.Fatal(err)
			}
			b.Checkpoints[0] = string(note)
		}, []string{"checkpoint 0", stranger.DID(), "re-signed"}},
		{"a checkpoint and its key replaced", func(b *Bundle) {
			c, _, err := auditproof.Open([]byte(b.Checkpoints[0]), func(string) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			note, err := auditproof.Sign(c, stranger)
			if err != nil {
				t.Fatal(err)
			}
			b.Checkpoints[0], b.Keys = string(note), []string{stranger.DID()}
		}, []string{"record 1", "not signed by any of its keys"}},
		{"a checkpoint's size changed", func(b *Bundle) {
			l := strings.SplitN(b.Checkpoints[0], "\n", 3)
			b.Checkpoints[0] = l[0] + "\n" + l[1] + "0\n" + l[2]
		}, []string{"checkpoint 0", "does not verify"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Bundle
			if err := json.Unmarshal(p.exportBundle(t, BundleSelect{ConversationID: p.conv}), &b); err != nil {
				t.Fatal(err)
			}
			c.tamper(&b)
			raw, _ := json.Marshal(&b)
			rep, err := VerifyBundle(raw, nil)
			var f *BundleFailure
			if !errors.As(err, &f) || !errors.Is(err, ErrBundleInvalid) || rep.Failure != f {
				t.Fatalf("verify-bundle: %v, want a failure", err)
			}
			for _, w := range c.want {
				if !strings.Contains(f.Error(), w) {
					t.Errorf("failure %q does not say %q", f, w)
				}
			}
		})
	}
}
