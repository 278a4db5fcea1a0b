package discovery

import (
	"context"
	"encoding/json"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What the daemon-level tests (package discovery_test, which start whole
// daemons with node/nodetest) read of discovery's state, and the helpers
// they share with this package's own tests.

var (
	SignedDoc = signedDoc // a document signed by signer, for announcements
	Payload   = payload   // an announcement's bytes on the topic
)

// MaxAnnouncementSize is the largest announcement accepted.
const MaxAnnouncementSize = maxAnnouncementSize

// GossipCounts are the announcer's counters.
type GossipCounts struct {
	Published, Accepted, Rejected, Ignored, Throttled uint64
}

// GossipCounts reads the announcer's counters.
func (d *Discovery) GossipCounts() GossipCounts {
	g := d.gossip
	return GossipCounts{Published: g.published.Load(), Accepted: g.accepted.Load(), Rejected: g.rejected.Load(),
		Ignored: g.ignored.Load(), Throttled: g.throttled.Load()}
}

// GossipMeshPeers are the peers in the announcer's mesh.
func (d *Discovery) GossipMeshPeers() []peer.ID { return d.gossip.meshPeers() }

// GossipSettled reports whether the announcer's publish loop has stopped.
func (d *Discovery) GossipSettled() bool {
	g := d.gossip
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.publishing
}

// PublicView is the view discovery publishes (for a stranger).
func (d *Discovery) PublicView() (*negotiate.SignedView, error) { return d.views.public() }

// AdvertisedView is the public view less what is advertised only when
// eligible.
func (d *Discovery) AdvertisedView() (*negotiate.SignedView, error) { return d.views.announced() }

// RefreshImports runs one refresh of the imported documents.
func (d *Discovery) RefreshImports(ctx context.Context) { d.imports.refresh(ctx) }

// AnnounceTopic is the GossipSub topic of announcements.
const AnnounceTopic = announceTopic

// DecodeAnnouncement reads an announcement's view.
var DecodeAnnouncement = decodeAnnouncement

// VerifiedAnnouncement is a verified announcement as the peer cache keeps
// it: its document's hash and its raw view.
type VerifiedAnnouncement struct {
	Hash string
	Raw  json.RawMessage
}

// VerifyAnnouncement verifies an announcement from author.
func VerifyAnnouncement(author peer.ID, b []byte) (VerifiedAnnouncement, error) {
	a, err := verifyAnnouncement(author, b)
	if err != nil {
		return VerifiedAnnouncement{}, err
	}
	return VerifiedAnnouncement{Hash: a.hash, Raw: a.raw}, nil
}

// BigView is a signed view of about target bytes.
var BigView = bigView
