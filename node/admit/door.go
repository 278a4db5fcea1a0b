// Package admit is the door: every inbound message — a libp2p conversation or capabilities
// query, an update push, the HTTPS inbox, a signed POST /invoke, fetched
// mail — passes one admission pipeline of named steps, in this order,
// before anything acts on it (DESIGN §3):
//
//	bounded decode   the transport's: a frame of at most 1 MiB (wire.Stream),
//	                 an HTTP body of at most 1 MB, within the container
//	                 bounds, its cost taken from the budget (budget.go) until
//	                 it is recorded (the audit step) or refused; decoding
//	                 validates
//	room             a greeting only (a new conversation): the audit log
//	                 has room for it (door.room: disk watermark, quota)
//	establish        the signer: the stream's remote peer (libp2p), or the
//	                 key the signature names, resolved (every other
//	                 transport); headers.from must be that signer's did:key
//	verify           the Ed25519 signature under the signer's key; the key
//	                 not revoked by the owner or a revocation statement,
//	                 not retired past its transition period; the documents
//	                 the message carries (a greeting's or an update's view,
//	                 key statements: node/keys) verified too
//	strangers' room  a greeting from a peer the owner has not made known:
//	                 strangers' files are within their share of the audit
//	                 log, the oldest of them deleted to make room when
//	                 they are not (door.strangerRoom)
//	replay           message_id not seen from this signer, date in the window
//	rate             the signer's bucket at the conversation's temperature
//	fit              the conversation: sequence, phase, owner of its ID
//	audit            the message is written to the audit log
//
// and then, by the transport: commit (the message takes its place in its
// conversation) → decide → act → answer. Transports differ only
// in how the signer is established (arrival.stream), which replay window
// applies (arrival.window), whether headers.to must name this daemon
// (arrival.addressed: it must whenever no stream to this daemon carried it)
// and what fitting means (arrival.fit).
//
// Nothing reaches the agent, the peer cache, the trust records or the
// conversation table before the audit entry is written, and nothing
// unadmitted reaches them at all. A refusal is recorded once, as a
// refusal, in the audit log's record of refusals (gossip.Refusal) — never
// in the conversation it claims — as a bounded summary, within a budget
// per connection, per address and for the daemon (refusallimit.go; past
// it refusals are counted, not written), and so is the error message that
// answers it; the local agent is told only that a
// message from an established sender was refused, and why, never its
// content. A message refused after the replay step is
// forgotten again by the seen-set, so that a sender refused for being too
// fast can send the same message later.
//
// Door is the component, New builds it; the decoding budget (budget.go),
// the bounds on recorded refusals (refusallimit.go) and its figures
// (figures.go: each step timed, refusals counted by step and wire code,
// read by node/metrics) are its own.
// Transports (node/converse, node/mail, key gossip, the HTTP binding)
// call Admit; what they must act on after it they do themselves.
package admit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/node/internal/ratelimit"
	"github.com/ifaced/ifaced/node/internal/tally"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/node/internal/peerid"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Arrival is one inbound message at the door and what its transport knows
// about it.
type Arrival struct {
	Via       string          // the transport, as the audit log names it
	Msg       *gossip.Message // decoded and validated
	Stream    peer.ID         // libp2p: the stream's remote peer, the only signer accepted; "" elsewhere
	Addressed bool            // headers.to must name this daemon
	Window    *identity.ReplayGuard
	// temperature is the rate's temperature for the signer ("" is cool);
	// nil charges at cool.
	Temperature func(from peer.ID) string
	// validate checks the parts the transport reads (a greeting's
	// proposal), before anything else: nil when there are none.
	Validate func() error
	// uncharged: the pace is bounded elsewhere (an answer to this daemon's
	// own request, mail this daemon fetched), so no rate bucket is charged.
	Uncharged bool
	// verify checks the documents the message carries, after its signature.
	Verify func(from peer.ID) error
	// fit checks that the message fits its conversation without changing
	// it; nil fits anywhere. commit then records it in the conversation,
	// after the audit entry is written: nothing unadmitted changes a
	// conversation's state.
	Fit    func(from peer.ID) error
	Commit func(from peer.ID) error
	// views are the phases in which this transport reads a view (part
	// "capabilities") and checks it in verify; a view in any other
	// message is refused, never passed on unverified.
	Views []gossip.Phase
	Note  string // for the audit entry
	// release gives back the message's share of the decoding budget
	// (wire.Stream.ReadHeld): once the message is recorded (the audit
	// step, which copies it twice), or refused. nil: none held.
	Release func()
}

// Door admits inbound messages. It holds exactly what the steps need.
type Door struct {
	// strangers bounds the refusal events of senders nobody established:
	// the agent hears of some, and of how many more there were, so that
	// no flood of junk can crowd its event stream.
	strangers  *rate.Limiter
	suppressed atomic.Int64
	// refusals bounds the refusals written to the record of refusals
	// (refusallimit.go), charged to sources among which is the address of
	// a libp2p peer's connection (conns).
	refusals *refusalBudget
	conns    network.Network
	// noRoom is set while the audit log has no room for new conversations,
	// so that the owner is told once when it happens and once when it ends.
	noRoom atomic.Bool
	full   diskFull // the audit log's disk is full (diskfull.go)
	self   string   // this daemon's did:key
	audit  *gossip.AuditLog
	replay *identity.ReplayGuard
	rates  *ratelimit.Limits
	trust  Trust
	events *events.Hub
	log    *slog.Logger
	now    func() time.Time
	budget *Budget // the decoding budget messages hold until they are recorded
	// keys checks the key statements a message carries (in the verify
	// step) and follows them once it is audited; nil: none.
	keys KeyStatements
	// beforeFit, when set (tests only), runs just before the fit step:
	// a seam where a test holds messages to race them at that step.
	beforeFit func(*Arrival)
	// The figures (figures.go): how long each step took, and the
	// refusals by step and wire code.
	latencies     *tally.Histograms
	refusalCounts *tally.Table
}

// Trust is what the door asks of the trust book (node/trust's Book is
// one): whether a key is refused (the owner revoked it, a statement
// revoked or retired it), and whether the owner made a peer known.
// Strangers' files share a quarter of the audit log's quota, the oldest
// going first (gossip.StrangerShare), and strangers share three quarters
// of the decoding budget.
type Trust interface {
	KeyRevoked(peer.ID) error
	Known(peerID string) bool
}

// KeyStatements checks the key statements a message carries, in the
// verify step, and follows them once the message is audited (node/keys'
// Lifecycle is one), whichever transport brought it.
type KeyStatements interface {
	Verify(m *gossip.Message, from peer.ID) error
	Act(from peer.ID, via string, m *gossip.Message)
}

// Deps is what NewDoor builds the door from.
type Deps struct {
	Self        string    // this daemon's did:key: headers.to must name it where a message is addressed
	Host        host.Host // its connections: a libp2p peer's address and whether it greeted (GreetedTag)
	Audit       *gossip.AuditLog
	Replay      *identity.ReplayGuard // the default replay window; an Arrival may name another
	Rates       *ratelimit.Limits
	Trust       Trust
	Keys        KeyStatements // nil: no key statement is followed
	Events      *events.Hub
	MaxMemoryMB int // limits.max_memory_mb: the decoding budget is half of it (BudgetSize)
	Log         *slog.Logger
	Now         func() time.Time
	// BeforeFit, when set (tests only), runs just before the fit step: a
	// seam where a test holds messages to race them at that step.
	BeforeFit func(*Arrival)
}

// New builds the door.
func New(d Deps) *Door {
	cm := d.Host.ConnManager()
	door := &Door{self: d.Self, audit: d.Audit, replay: d.Replay, rates: d.Rates, trust: d.Trust, keys: d.Keys, events: d.Events,
		log: d.Log, now: d.Now, conns: d.Host.Network(), beforeFit: d.BeforeFit,
		strangers: rate.NewLimiter(rate.Every(strangerEventEvery), StrangerEventBurst), refusals: newRefusalBudget(),
		latencies: tally.NewHistograms(stepNames[stepRoom:stepCommit], tally.StepBounds), refusalCounts: tally.NewTable(stepNames, tally.Codes()),
		budget: newBudget(d.MaxMemoryMB, func(p peer.ID) bool {
			ti := cm.GetTagInfo(p)
			return ti != nil && ti.Tags[GreetedTag] > 0
		})}
	// Refusals the previous run counted and no record said: the next
	// record says them (KeepLeftOut).
	door.refusals.leftOut.Add(d.Audit.LeftOut())
	return door
}

// GreetedTag marks, for the connection manager, the peers this daemon has
// exchanged verified greetings with (node/converse tags them). When it
// trims connections it closes those of lower value first, so strangers
// that never greeted (a flood of fresh identities, say) go before the
// peers in a negotiation; and the decoding budget does not count a peer
// so tagged on its current connections a stranger.
const GreetedTag = "ifaced-greeted"

// Budget is the decoding budget, for the transports that decode outside a
// libp2p stream (the HTTP binding).
func (d *Door) Budget() *Budget { return d.budget }

// Admitted is a message through the door: its signer, established. On a
// refusal, from is the signer when the door established it.
type Admitted struct {
	from peer.ID
	msg  *gossip.Message
}

// From is the signer the door established.
func (in Admitted) From() peer.ID { return in.from }

// Msg is the message admitted.
func (in Admitted) Msg() *gossip.Message { return in.msg }

// errAudit marks a failure to write the audit entry of an admitted
// message: the daemon's own failure, after which nothing acts on it.
var ErrAudit = errors.New("audit log")

// Admit runs the pipeline on a. On refusal the refusal is recorded and the
// error says why (wire.CodeOf names its code); the transport answers.
// Each step that applies to a is timed (Latencies) and each refusal
// counted by its step and code (Refusals).
func (d *Door) Admit(a *Arrival) (Admitted, error) {
	if a.Release != nil {
		defer a.Release() // a refusal before the audit step
	}
	greeting := a.Msg.Headers.Phase == gossip.PhaseGreeting
	w := d.stopwatch()
	err := d.room(a)
	if greeting {
		w.lap(stepRoom)
	}
	if err != nil {
		return Admitted{}, d.refuse(a, stepRoom, "", false, false, err)
	}
	err = d.validate(a)
	w.lap(stepValidate)
	if err != nil {
		return Admitted{}, d.refuse(a, stepValidate, "", false, false, err)
	}
	from, pub, err := d.establish(a)
	w.lap(stepEstablish)
	if err != nil {
		return Admitted{}, d.refuse(a, stepEstablish, from, false, false, err)
	}
	if err := a.Msg.Verify(pub); err != nil {
		w.lap(stepVerify)
		return Admitted{}, d.refuse(a, stepVerify, from, false, false, err)
	}
	// From here on the signer is established: its signature verified.
	err = d.verify(a, from)
	w.lap(stepVerify)
	if err != nil {
		return Admitted{from: from}, d.refuse(a, stepVerify, from, true, false, err)
	}
	err = d.strangerRoom(a, from)
	if greeting {
		w.lap(stepStrangersRoom)
	}
	if err != nil {
		return Admitted{from: from}, d.refuse(a, stepStrangersRoom, from, true, false, err)
	}
	err = d.checkReplay(a, from)
	w.lap(stepReplay)
	if err != nil {
		return Admitted{from: from}, d.refuse(a, stepReplay, from, true, false, err)
	}
	err = d.charge(a, from)
	if !a.Uncharged {
		w.lap(stepRate)
	}
	if err != nil {
		return Admitted{from: from}, d.refuse(a, stepRate, from, true, true, err)
	}
	if d.beforeFit != nil {
		d.beforeFit(a)
		w.reset() // a test's hold is not the fit step's time
	}
	if a.Fit != nil {
		err := a.Fit(from)
		w.lap(stepFit)
		if err != nil {
			return Admitted{from: from}, d.refuse(a, stepFit, from, true, true, err)
		}
	}
	err = d.record(a, from)
	w.lap(stepAudit)
	if a.Release != nil {
		// Recorded (or not): the decoded message's share of the budget,
		// held through the audit's copies of it, goes back.
		a.Release()
	}
	if err != nil {
		// Not written to the record of refusals (the log failed), but a
		// refusal all the same: counted.
		d.refusalCounts.Add(int(stepAudit), tally.CodeOf(err))
		d.forget(a, from)
		return Admitted{from: from}, err
	}
	if a.Commit != nil {
		// Fitted a moment ago; only a message racing it on the same
		// conversation can make this fail. It is audited as received,
		// and recorded as refused too.
		if err := a.Commit(from); err != nil {
			d.refused(stepCommit, a.Via, from, true, a.Msg, nil, err)
			return Admitted{from: from}, err
		}
	}
	d.followKeys(a, from)
	return Admitted{from: from, msg: a.Msg}, nil
}

// room refuses a greeting — a new conversation — while the audit log has
// no room for one (gossip.ErrNoRoom: the disk below audit.min_free_mb, or
// the current day alone past audit.max_mb and its headroom), with wire
// code unavailable and the reason (fetched mail stays at its relay);
// every other message goes on, so the conversations already admitted
// continue while the disk takes their entries. The owner is told (a
// warning in the log) when the room runs out and when it is back.
func (d *Door) room(a *Arrival) error {
	if a.Msg.Headers.Phase != gossip.PhaseGreeting {
		return nil
	}
	err := d.audit.Room()
	if err == nil {
		if d.noRoom.Swap(false) {
			d.log.Info("the audit log has room again: new conversations are taken")
		}
		return nil
	}
	if !d.noRoom.Swap(true) {
		d.log.Warn("refusing new conversations until the audit log has room", "err", err)
	}
	// errAudit too: a fetched greeting is left at its relay, to come again
	// once there is room, as when its entry could not be written.
	return fmt.Errorf("%w (%w): %w", wire.ErrUnavailable, ErrAudit, err)
}

// Stranger reports whether pid is a peer the owner has not made known.
func (d *Door) Stranger(pid peer.ID) bool { return !d.trust.Known(peerid.String(pid)) }

// strangerRoom makes room in the audit log for a greeting — a new
// conversation — from a stranger: strangers' files take at most their
// share of the log, so the oldest of them are deleted for a new one
// (gossip.AuditLog.StrangerRoom), never a file of a peer the owner made
// known. Fresh keys cost nothing, so without it strangers could fill the
// quota with admitted greetings and shut out everyone; with it they cannot
// shut out even each other. It refuses (wire code unavailable, and why)
// only when no room could be made. It runs once the signer is established.
func (d *Door) strangerRoom(a *Arrival, from peer.ID) error {
	if a.Msg.Headers.Phase != gossip.PhaseGreeting || !d.Stranger(from) {
		return nil
	}
	if err := d.audit.StrangerRoom(); err != nil {
		return fmt.Errorf("%w (%w): %w", wire.ErrUnavailable, ErrAudit, err)
	}
	return nil
}

// validate checks what the transport reads of the message beyond its
// decoding: its phase and parts (a.validate), then that a view travels
// only where the transport verifies one. The transport's own check comes
// first, so that a message of the wrong kind (an update push that is no
// context message) is refused for what it is, not for the view it
// carries.
func (d *Door) validate(a *Arrival) error {
	if a.Validate != nil {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	if _, ok := a.Msg.Body.Part(negotiate.PartCapabilities); ok && !slices.Contains(a.Views, a.Msg.Headers.Phase) {
		return fmt.Errorf("%w: a %q part travels only in a greeting or an update push (a context message on %s)", gossip.ErrInvalidMessage, negotiate.PartCapabilities, wire.Update)
	}
	return nil
}

// establish finds the signer: the stream's peer on libp2p, else the key
// the message's Ed25519 signature names. headers.from must be its did:key.
func (d *Door) establish(a *Arrival) (peer.ID, ed25519.PublicKey, error) {
	m := a.Msg
	from := a.Stream
	if from == "" {
		var err error
		if from, err = signerOf(m); err != nil {
			if m.Security != nil && len(m.Security.Signatures) > 0 {
				return "", nil, fmt.Errorf("%w: %v", wire.ErrUnknownSender, err)
			}
			return "", nil, err
		}
	}
	pub, err := identity.PublicKeyFromPeerID(from)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", gossip.ErrWrongKey, err)
	}
	if did := identity.DIDKey(pub); m.Headers.From.Agent != did {
		return "", nil, fmt.Errorf("%w: headers.from is %q, but the message is signed by %s; from must name the signer",
			gossip.ErrWrongKey, m.Headers.From.Agent, did)
	}
	if a.Addressed && !slices.ContainsFunc(m.Headers.To, func(t gossip.Agent) bool { return t.Agent == d.self }) {
		return "", nil, fmt.Errorf("%w: the message is addressed to someone else (headers.to does not name %s)", gossip.ErrInvalidMessage, d.self)
	}
	return from, pub, nil
}

// signerOf is the peer whose key made m's Ed25519 signature.
func signerOf(m *gossip.Message) (peer.ID, error) {
	if m.Security != nil {
		for _, sig := range m.Security.Signatures {
			if sig.Alg != identity.AlgEd25519 {
				continue
			}
			pub, err := identity.PublicKeyFromKeyID(sig.KeyID)
			if err != nil {
				return "", fmt.Errorf("%w: %v", gossip.ErrUnsigned, err)
			}
			return identity.PeerIDFromPublicKey(pub)
		}
	}
	return "", fmt.Errorf("%w: a message that came without a stream needs an ed25519 signature naming its key", gossip.ErrUnsigned)
}

// errDocument marks a failure of a document a verified message carries.
var errDocument = errors.New("carried document")

// verify checks, for a signer whose signature verified, that the owner
// has not revoked its key, and the documents the message carries.
func (d *Door) verify(a *Arrival, from peer.ID) error {
	if err := d.trust.KeyRevoked(from); err != nil {
		return err
	}
	if a.Verify != nil {
		if err := a.Verify(from); err != nil {
			return fmt.Errorf("%w: %w", errDocument, err)
		}
	}
	if d.keys != nil {
		if err := d.keys.Verify(a.Msg, from); err != nil {
			return fmt.Errorf("%w: %w", errDocument, err)
		}
	}
	return nil
}

// followKeys acts on the key statements of an admitted, audited message
// (node/keys), whichever transport brought it.
func (d *Door) followKeys(a *Arrival, from peer.ID) {
	if d.keys != nil {
		d.keys.Act(from, a.Via, a.Msg)
	}
}

// checkReplay refuses a message_id seen before from the same signer, or a
// date outside the window. Seen IDs are kept per signer, so no peer can
// use up another's message IDs before the genuine messages arrive (say,
// through a relay), and whichever transport brings a message first, the
// second is a replay.
func (d *Door) checkReplay(a *Arrival, from peer.ID) error {
	w := a.Window
	if w == nil {
		w = d.replay
	}
	return w.Check(seenKey(from, a.Msg), a.Msg.Headers.Date, d.now())
}

// charge takes one message from the signer's rate bucket.
func (d *Door) charge(a *Arrival, from peer.ID) error {
	if a.Uncharged {
		return nil
	}
	t := ""
	if a.Temperature != nil {
		t = a.Temperature(from)
	}
	return d.rates.Allow(from, t)
}

// record writes the admitted message to the audit log.
func (d *Door) record(a *Arrival, from peer.ID) error {
	err := d.audit.Record(gossip.AuditEntry{At: d.now().UTC(), Direction: gossip.Received, Peer: peerid.String(from),
		Transport: a.Via, Note: a.Note, Message: a.Msg, Stranger: d.Stranger(from)})
	if err != nil {
		err = fmt.Errorf("%w: recording a received %s: %w", ErrAudit, a.Msg.Headers.Phase, err)
	}
	return d.recorded(err)
}

// forget takes a message out of the seen-set again: it passed the replay
// step but was not admitted, so its sender may send it again.
func (d *Door) forget(a *Arrival, from peer.ID) {
	w := a.Window
	if w == nil {
		w = d.replay
	}
	if err := w.Forget(seenKey(from, a.Msg)); err != nil {
		d.log.Warn("forgetting a message ID", "peer", from, "message", a.Msg.Headers.MessageID, "err", err)
	}
}

// refuse records a refusal at step once and tells the local agent; it
// returns cause. verified says whether the signer is established (its
// signature verified), seen whether the message passed the replay step.
func (d *Door) refuse(a *Arrival, at step, from peer.ID, verified, seen bool, cause error) error {
	if seen {
		d.forget(a, from)
	}
	established := from
	if !verified {
		established = a.Stream // only a secure channel vouches for an unverified message's sender
	}
	d.refused(at, a.Via, established, verified, a.Msg, nil, cause)
	return cause
}

// The pace of refusal events for senders nobody established.
const (
	strangerEventEvery = 6 * time.Second
	StrangerEventBurst = 10
)

// Refused records a refusal of m (nil when nothing decoded; raw the bytes
// as received when known). The local agent is told of refusals whose
// sender is established (the stream's peer, or a verified signer), with
// the code and a reason cut short; of the others it hears at most one every
// strangerEventEvery (after a burst of strangerEventBurst), each saying
// how many were left out before it, so that strangers cannot crowd the
// agent's event stream. A refusal is written to the record of refusals
// (and logged) as a bounded summary when the refusal budget of its
// sources allows (refusallimit.go) and the audit log has room; any other
// is counted, and the next one written says how many were left out.
//
// Transports call it for a message their bounded decode step refused
// (m nil): it is counted as a refusal at the decode step.
func (d *Door) Refused(via string, established peer.ID, verified bool, m *gossip.Message, raw []byte, cause error) {
	d.refused(stepDecode, via, established, verified, m, raw, cause)
}

// refused is Refused at step s, which it is counted under.
func (d *Door) refused(s step, via string, established peer.ID, verified bool, m *gossip.Message, raw []byte, cause error) {
	code := wire.CodeOf(cause)
	d.refusalCounts.Add(int(s), tally.CodeIndex(code))
	at := d.now().UTC()
	d.recordRefusal(via, established, verified, m, raw, cause, at)
	e := events.Event{Type: events.EventRefused, At: at, Detail: fmt.Sprintf("%s: %s", code, gossip.Clip(cause.Error(), 256))}
	if established != "" {
		e.Peer = peerid.String(established)
	}
	if established == "" {
		if !d.strangers.AllowN(at, 1) {
			d.suppressed.Add(1)
			return
		}
		if n := d.suppressed.Swap(0); n > 0 {
			e.Detail += fmt.Sprintf(" (and %d more refusals of unestablished senders before this one; the record of refusals holds them all)", n)
		}
	}
	if verified && m != nil {
		e.ConversationID = m.Headers.ConversationID
	}
	d.events.Publish(e)
}

// recordRefusal writes the summary of a refusal within the refusal budget.
func (d *Door) recordRefusal(via string, established peer.ID, verified bool, m *gossip.Message, raw []byte, cause error, at time.Time) {
	var addr netip.Addr
	if via == ViaLibp2p {
		addr = remoteAddrOf(d.conns, established)
	}
	ok, leftOut := d.refusals.take(at, refusalSourcesOf(via, established, addr)...)
	if !ok {
		return
	}
	code := wire.CodeOf(cause)
	r := gossip.Refusal{At: at, Transport: via, Code: string(code), Reason: cause.Error(), Verified: verified, LeftOut: leftOut}
	if established != "" {
		r.Peer = peerid.String(established)
	}
	gossip.SummariseRefusal(&r, m, raw)
	if err := d.audit.RecordRefusal(r); err != nil {
		d.refusals.unwritten(leftOut + 1)
		if !errors.Is(err, gossip.ErrNoRoom) {
			d.log.Warn("recording a refusal", "err", err)
		}
		return
	}
	d.log.Info("refused message", "via", via, "peer", r.Peer, "code", code, "err", gossip.Clip(r.Reason, 256), "left_out_before", leftOut)
}

// leftOutTransport marks a record of refusals that is a count, not a
// refusal: reportLeftOut's.
const LeftOutTransport = "-"

// ReportLeftOut writes, when refusals were left out since the last record
// written, a record saying how many (transport "-", no code), so that the
// count reaches the record of refusals even when no refusal follows the
// flood. The daemon calls it every hour.
func (d *Door) ReportLeftOut() {
	n := d.refusals.leftOut.Swap(0)
	if n == 0 {
		return
	}
	r := gossip.Refusal{At: d.now().UTC(), Transport: LeftOutTransport, LeftOut: n,
		Reason: fmt.Sprintf("%d refusals were counted but not written (over the refusal budget, or with the audit log out of room)", n)}
	if err := d.audit.RecordRefusal(r); err != nil {
		d.refusals.unwritten(n)
		if !errors.Is(err, gossip.ErrNoRoom) {
			d.log.Warn("recording the count of refusals left out", "err", err)
		}
		return
	}
	d.log.Info("refusals left out of the record of refusals", "count", n)
}

// KeepLeftOut keeps the count of refusals left out that no record has
// said yet for the next run (gossip.AuditLog.KeepLeftOut), so that a
// restart loses none of it. The daemon calls it with reportLeftOut every
// hour and at close.
func (d *Door) KeepLeftOut() {
	if err := d.audit.KeepLeftOut(d.refusals.leftOut.Load()); err != nil {
		d.log.Warn("keeping the count of refusals left out for the next run", "err", err)
	}
}

// Publish tells the local agent of an admitted message (the act step).
func (d *Door) Publish(in Admitted, convID, detail string) {
	d.events.Publish(events.Event{Type: events.EventMessage, At: d.now(), Peer: peerid.String(in.from), ConversationID: convID, Message: in.msg, Detail: detail})
}

// seenKey is a message's entry in the seen-set.
func seenKey(from peer.ID, m *gossip.Message) string {
	return peerid.String(from) + " " + m.Headers.MessageID
}

// ViaLibp2p is the libp2p transport as the audit log names it: the one
// transport whose signer the stream establishes, and whose refusals are
// charged to the connection's address too.
const ViaLibp2p = "libp2p"
