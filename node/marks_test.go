package node

import (
	"context"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/owner"
)

// hiddenCapability is one no stranger qualifies for, and which is shown
// only to those who do.
func hiddenCapability(name string, tier string) negotiate.Capability {
	return negotiate.Capability{Name: name, Description: "Only for " + tier, Advertise: negotiate.AdvertiseWhenEligible,
		Conditions: &conditions.Conditions{MinDisclosure: tier}}
}

// TestHiddenChangeMovesNoStrangersView: a stranger's view over libp2p
// keeps its seq, updated and very signature (its have_view hash) when the
// owner adds a capability no stranger qualifies for, and across a restart
// after it; a change the stranger can see moves them to the document's
// seq.
func TestHiddenChangeMovesNoStrangersView(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	query := func() *negotiate.Document {
		t.Helper()
		r, err := bob.QueryCapabilities(context.Background(), alice.pid(), negotiate.Proposal{})
		if err != nil {
			t.Fatal(err)
		}
		return r.View
	}
	first := query()
	firstSum, _ := alice.docs.View(strangerFacts(alice))
	doc, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, hiddenCapability("vault.open", "close"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Seq != first.Seq+1 {
		t.Fatalf("the owner's document is at seq %d, want %d", doc.Seq, first.Seq+1)
	}
	second := query()
	if second.Seq != first.Seq || second.Updated != first.Updated {
		t.Fatalf("a hidden change moved the stranger's view: seq %d → %d, updated %s → %s", first.Seq, second.Seq, first.Updated, second.Updated)
	}
	if v, _ := alice.docs.View(strangerFacts(alice)); v.Sum != firstSum.Sum {
		t.Fatal("a hidden change re-signed the stranger's view")
	}

	alice = restartDaemon(t, stop(t, alice))
	connect(t, bob, alice)
	if again := query(); again.Seq != first.Seq || again.Updated != first.Updated {
		t.Fatalf("after a restart the stranger's view moved: seq %d → %d, updated %s → %s", first.Seq, again.Seq, first.Updated, again.Updated)
	}

	doc, err = alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "weather.now", Description: "Current weather"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if third := query(); third.Seq != doc.Seq || third.Updated != doc.Updated {
		t.Fatalf("a visible change: the stranger's view is at seq %d (updated %s), want the document's %d (%s)", third.Seq, third.Updated, doc.Seq, doc.Updated)
	}
}

// strangerFacts are the facts of a stranger's greeting.
func strangerFacts(d *testDaemon) conditions.Facts {
	return d.policy.InForce().GrantTo(negotiate.Requester{Level: conditions.Signed}, negotiate.Proposal{}).Facts(owner.AnyRequester, 0)
}

// stop closes d and returns it, to be started again in its home.
func stop(t *testing.T, d *testDaemon) *testDaemon {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestViewSeqNeverGoesDownForAPeer: a peer moving between classes whose
// last visible changes differ — bob granted professional, shown a change
// only professionals see, then lowered to public, whose view did not
// change — is never shown a lower seq than it holds, so its daemon keeps
// taking the views (no stale_seq), before and after a restart.
func TestViewSeqNeverGoesDownForAPeer(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	greet := func(want string) *negotiate.Document {
		t.Helper()
		r, err := bob.Greet(context.Background(), alice.pid(), negotiate.Proposal{})
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		return r.View
	}
	public := greet("public")
	if err := alice.Policy().SetDisclosure("", bob.pid().String(), "professional"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, hiddenCapability("notes.share", "professional"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	professional := greet("professional")
	if professional.Seq <= public.Seq {
		t.Fatalf("the professional view after a change it shows has seq %d, the public one before had %d", professional.Seq, public.Seq)
	}
	if v, _ := alice.docs.View(strangerFacts(alice)); v.Doc.Seq != public.Seq {
		t.Fatalf("the public view moved to seq %d on a change only professionals see", v.Doc.Seq)
	}
	if err := alice.Policy().SetDisclosure("", bob.pid().String(), "public"); err != nil {
		t.Fatal(err)
	}
	lowered := greet("lowered to public")
	if lowered.Seq < professional.Seq {
		t.Fatalf("bob was shown seq %d after seq %d", lowered.Seq, professional.Seq)
	}
	if testkit.CapNames(lowered) != testkit.CapNames(public) {
		t.Fatalf("lowered to public, bob sees %q, want %q", testkit.CapNames(lowered), testkit.CapNames(public))
	}
	alice = restartDaemon(t, stop(t, alice))
	connect(t, bob, alice)
	if again := greet("after a restart"); again.Seq < professional.Seq {
		t.Fatalf("after a restart bob was shown seq %d after seq %d", again.Seq, professional.Seq)
	}
}
