package mail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/p2phost"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Store and forward (IFP-8), in three parts:
//
//   - At a relay (relay.service and relay.mailbox), handleMailbox holds
//     messages for registered peers, so the relay is never an open mail
//     drop for strangers. A peer registers by fetching its mail while it
//     holds a circuit relay slot here (reservationBook), so the relay's own
//     reservation limits govern who may; a fetch without a slot is served
//     what waits and registers nothing. A registration holding no mail
//     lapses mailbox.idle after the last fetch; one holding mail lasts as
//     long as its mail. The table holds at most 4 × relay.max_reservations
//     registrations and, full, makes room rather than refuse: the least
//     recently registered one holding no mail goes first, and one holding
//     mail (with its mail) only when none is empty (store.Mailboxes); an
//     address past its own share of the table (mailboxesPerAddress) makes
//     room among its own registrations instead, so it cannot push anyone
//     else out. A published message must be signed by the publishing peer;
//     the relay appends its trace.received entry and keeps it for
//     mailbox.retention (IFP-8 §6: 7 days), less if the message's
//     ttl_seconds says so, or until the recipient acknowledges it.
//   - Quotas bound what each recipient can be sent (max_messages, max_kb),
//     what each sender key can leave (max_per_sender) and, since fresh
//     keys cost nothing, what each sender address can leave whatever its
//     keys (max_per_address; an IPv4 address, an IPv6 /64). Of
//     max_total_mb, half is a pool any mail may fill and half is split in
//     equal shares, one per mailbox the table may hold: when the pool is
//     full a registered recipient may still be sent up to its share, so
//     mail for a peer is never refused for what others hold before it has
//     its share, and the relay never holds more than max_total_mb.
//   - A sender (Send) whose peer cannot be reached queues the message in
//     its outbox (in the store, so a restart loses nothing) and leaves it
//     at one of the relays the peer's document names (one it is connected
//     to first, so a dead relay's dial does not come first); a relay that cannot
//     be reached is tried again after 1 minute, 5 minutes, 30 minutes, then
//     hourly (IFP-6 §7), until mailbox.give_up, when the owner is told.
//     Errors that resending cannot fix (a malformed or unsigned message)
//     are not retried.
//   - A recipient (Fetch) fetches its mail each time it reserves a slot
//     on one of its relays, at once when that relay tells it that mail
//     waits (tellWaiting, handleWaiting; at most once a second per relay),
//     and every mailbox.poll after: each message's
//     signature must verify under the key its signature names, it must be
//     addressed to this daemon and pass the replay window; it is audited
//     with its trace, and only then acknowledged, so a crash between the
//     two delivers it again and the replay window drops the copy.
//
// A message left at a mailbox is a greeting of a conversation of its own,
// carrying text and no capability view: the relay reads everything it
// holds, and a view is meant for one peer's eyes only. The one exception
// is a context message said in a conversation that the peer did not
// acknowledge (node/wire: Acknowledgements): the same signed message is
// left, so that a copy that did arrive is dropped as a replay.

const mailboxProtocol = wire.Mailbox

// ViaMailbox is the transport the audit log names for mailbox mail.
const ViaMailbox = "ifp-8-mailbox"

// mailBudget is how many message bytes one retrieve answer carries, so
// the answer fits in a frame.
const mailBudget = wire.MaxMailMessage

// mailRetries is the IFP-6 §7 schedule: the wait before each retry; the
// last one repeats until mailbox.give_up.
var mailRetries = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour}

// ErrUnreachable: a peer could not be reached directly and no mailbox
// relay is known for it.
var ErrUnreachable = errors.New("peer unreachable")

// SendResult says how a message went.
type SendResult struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	// Delivered: "conversation": said in a live conversation, and
	// acknowledged when the peer acknowledges messages (node/wire:
	// Acknowledgements); "queued": in the outbox for the peer's mailbox,
	// because the peer could not be reached or did not acknowledge it.
	Delivered string `json:"delivered"`
	Detail    string `json:"detail,omitempty"`
}

// Send says text to pid: in the newest open conversation with it if there
// is one, else in a new one (a greeting, dialled through any address known,
// relayed ones included); if the peer cannot be reached, the text is
// queued for its mailbox relays as a one-message conversation.
func (mb *Mail) Send(ctx context.Context, pid peer.ID, text string) (*SendResult, error) {
	return mb.SendIn(ctx, pid, "", text)
}

// SendIn is Send in the open conversation convID with pid; with convID
// empty, in the newest open conversation with pid (or a new one, or the
// mailbox). A named conversation that is not open is ErrNoConversation:
// the text is neither said elsewhere nor queued.
func (mb *Mail) SendIn(ctx context.Context, pid peer.ID, convID, text string) (*SendResult, error) {
	return mb.send(ctx, pid, convID, text)
}

// send is SendIn with parts beside the text (a key statement, node/keys/tell).
// Tell sends text with parts to pid as Send does; queued says it was left
// in the outbox for the peer's mailbox (the key notices' Sender).
func (mb *Mail) Tell(ctx context.Context, pid peer.ID, text string, parts ...gossip.Part) (queued bool, err error) {
	res, err := mb.send(ctx, pid, "", text, parts...)
	if err != nil {
		return false, err
	}
	return res.Delivered == "queued", nil
}

func (mb *Mail) send(ctx context.Context, pid peer.ID, convID, text string, parts ...gossip.Part) (*SendResult, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("sending: the text is empty")
	}
	for attempt := 0; ; attempt++ {
		id, err := mb.convs.Picked(pid, convID)
		if err != nil {
			return nil, fmt.Errorf("sending to %s: %w", pid, err)
		}
		fresh := id == ""
		if fresh && convID == "" {
			if why := mb.away(ctx, pid); why != nil {
				return mb.queueMail(pid, text, why, parts...)
			}
		}
		if fresh {
			res, err := mb.convs.Greet(ctx, pid, negotiate.Proposal{})
			if err != nil {
				var remote *wire.RemoteError
				if errors.As(err, &remote) || ctx.Err() != nil {
					return nil, err
				}
				// Nobody answered: leave it at the peer's mailbox.
				return mb.queueMail(pid, text, err, parts...)
			}
			if id = res.ConversationID; !mb.convs.IsOpen(id) {
				return nil, fmt.Errorf("sending to %s: the conversation closed at once", pid)
			}
		}
		m, _, err := mb.convs.SayAcknowledged(ctx, id, text, parts...)
		if err == nil {
			return &SendResult{ConversationID: id, MessageID: m.Headers.MessageID, Delivered: "conversation"}, nil
		}
		if m != nil && errors.Is(err, converse.ErrUnacknowledged) {
			// Written, but the peer did not say it has it: its path may
			// have died under the message. The conversation is done
			// for (unless it is the caller who stopped waiting); the
			// same signed message goes to the peer's mailbox, where a
			// copy that did arrive is dropped as a replay.
			mb.log.Info("a said message was not acknowledged; leaving it at the peer's mailbox", "peer", mb.named(pid), "conversation", id, "err", err)
			if ctx.Err() == nil {
				mb.convs.Abandon(id)
			}
			return mb.queueSaid(pid, m, err)
		}
		var remote *wire.RemoteError
		if errors.As(err, &remote) {
			// The peer refused the message, in a conversation that goes
			// on (rate_limited, say): its reason is the answer.
			return nil, err
		}
		if fresh || attempt > 0 || convID != "" || ctx.Err() != nil {
			return nil, err
		}
		// The conversation looked open but could not carry the message
		// (its stream died with a relay, say, or the peer closed it): end
		// it, and greet again through whatever path works now.
		mb.log.Info("an open conversation failed; greeting again", "peer", mb.named(pid), "conversation", id, "err", err)
		mb.convs.Abandon(id)
	}
}

// mailRelays are the relays pid's cached document names, as dialable
// relay addresses.
func (mb *Mail) mailRelays(pid peer.ID) []peer.AddrInfo {
	rec, err := mb.store.Peer(pid.String())
	if err != nil {
		return nil
	}
	view, err := negotiate.DecodeView(rec.View)
	if err != nil || view.Relay == nil {
		return nil
	}
	byID := map[peer.ID]*peer.AddrInfo{}
	var order []peer.ID
	for _, u := range view.Relay.URLs {
		info, ok := relayOf(u)
		if !ok || info.ID == pid || info.ID == mb.id.PeerID() {
			continue
		}
		if byID[info.ID] == nil {
			byID[info.ID] = &peer.AddrInfo{ID: info.ID}
			order = append(order, info.ID)
		}
		byID[info.ID].Addrs = append(byID[info.ID].Addrs, info.Addrs...)
	}
	out := make([]peer.AddrInfo, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

// liveFirst orders relays for leaving mail: those this daemon is
// connected to first, in their order, then the others. A relay that died
// costs its dial's timeout before the next is tried (5 s for QUIC, whose
// handshake nothing answers): when the relay carrying a conversation dies,
// the message that follows is left at the peer's other relay at once.
func (mb *Mail) liveFirst(relays []peer.AddrInfo) []peer.AddrInfo {
	var live, others []peer.AddrInfo
	for _, r := range relays {
		if mb.host.Network().Connectedness(r.ID) == network.Connected {
			live = append(live, r)
		} else {
			others = append(others, r)
		}
	}
	return append(live, others...)
}

// relayOf reads the relay out of a circuit address
// (<relay addr>/p2p/<relay>/p2p-circuit[/p2p/<peer>]).
func relayOf(s string) (peer.AddrInfo, bool) {
	ma, err := multiaddr.NewMultiaddr(s)
	if err != nil {
		return peer.AddrInfo{}, false
	}
	relayPart, _ := multiaddr.SplitFunc(ma, func(c multiaddr.Component) bool { return c.Code() == multiaddr.P_CIRCUIT })
	if relayPart == nil {
		return peer.AddrInfo{}, false
	}
	info, err := peer.AddrInfoFromP2pAddr(relayPart)
	if err != nil {
		return peer.AddrInfo{}, false
	}
	return *info, true
}

// queueMail builds the one-message conversation for pid and queues it.
func (mb *Mail) queueMail(pid peer.ID, text string, cause error, parts ...gossip.Part) (*SendResult, error) {
	if len(mb.mailRelays(pid)) == 0 {
		return nil, fmt.Errorf("sending to %s: %w (%v), and it names no mailbox relay: greet it once while it is reachable, or ask its owner for a relay", pid, ErrUnreachable, cause)
	}
	remote, err := peerid.Agent(pid)
	if err != nil {
		return nil, err
	}
	conv := gossip.NewConversation(gossip.NewID("conv", mb.now()), mb.convs.LocalAgent(), remote)
	m, err := conv.Next(gossip.PhaseGreeting, mb.now())
	if err != nil {
		return nil, err
	}
	m.Headers.TTLSeconds = int64(mb.cfg.Mailbox.Retention.Duration / time.Second)
	m.Body = gossip.Body{Text: text, Parts: parts}
	if err := m.Sign(mb.id, mb.now()); err != nil {
		return nil, err
	}
	return mb.enqueue(pid, m, cause, fmt.Sprintf("%s is unreachable (%v); the message is queued for its mailbox relays", pid, cause))
}

// queueSaid queues m, a message said in a conversation with pid that the
// peer did not acknowledge, for pid's mailbox relays as it was signed. Its
// audit entry as said stays; a second one says it was queued.
func (mb *Mail) queueSaid(pid peer.ID, m *gossip.Message, cause error) (*SendResult, error) {
	if len(mb.mailRelays(pid)) == 0 {
		return nil, fmt.Errorf("sending to %s: %w; it names no mailbox relay to leave it at, so message %s may not have arrived: greet it and send again", pid, cause, m.Headers.MessageID)
	}
	res, err := mb.enqueue(pid, m, cause, fmt.Sprintf("%s did not acknowledge the message (%v); the same message is queued for its mailbox relays", pid, cause))
	if err != nil {
		return nil, fmt.Errorf("%w; leaving message %s at the peer's mailbox instead: %w", cause, m.Headers.MessageID, err)
	}
	return res, nil
}

// enqueue puts the signed message m in the outbox for pid's mailbox
// relays and records that it did.
func (mb *Mail) enqueue(pid peer.ID, m *gossip.Message, cause error, detail string) (*SendResult, error) {
	raw, err := gossip.EncodeCBOR(m)
	if err != nil {
		return nil, err
	}
	if len(raw) > wire.MaxMailMessage {
		return nil, fmt.Errorf("sending to %s: %w: %d bytes, a mailbox takes at most %d", pid, gossip.ErrTooLarge, len(raw), wire.MaxMailMessage)
	}
	// Queued first, audited second: a crash between the two leaves a
	// message that will be sent and whose audit entry is missing, rather
	// than one the audit log says was queued and that never goes.
	now := mb.now()
	item := store.OutboxItem{ID: m.Headers.MessageID, To: pid.String(), Message: raw, Queued: now, NextAttempt: now}
	if err := mb.store.Mailboxes().PutOutbox(item); err != nil {
		return nil, err
	}
	if err := mb.convs.RecordSent(ViaMailbox, pid, m, "queued for the peer's mailbox: "+cause.Error(), nil); err != nil {
		mb.store.Mailboxes().DeleteOutbox(item.ID)
		return nil, err
	}
	mb.kickOutbox()
	return &SendResult{ConversationID: m.Headers.ConversationID, MessageID: m.Headers.MessageID, Delivered: "queued", Detail: detail}, nil
}

func (mb *Mail) kickOutbox() {
	select {
	case mb.kick <- struct{}{}:
	default:
	}
}

// Outbox lists the messages waiting to be left at a mailbox.
func (mb *Mail) Outbox() ([]store.OutboxItem, error) { return mb.store.Mailboxes().Outbox() }

// RunOutbox delivers queued messages when they are due.
func (mb *Mail) RunOutbox() {
	for {
		next := mb.deliverDue()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(mb.now()), 0)
		}
		t := time.NewTimer(wait)
		select {
		case <-mb.ctx.Done():
			t.Stop()
			return
		case <-mb.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// deliverDue tries every due message once and returns when the next one
// is due (zero if none is queued).
func (mb *Mail) deliverDue() time.Time {
	items, err := mb.store.Mailboxes().Outbox()
	if err != nil {
		mb.log.Error("reading the outbox", "err", err)
		return mb.now().Add(time.Minute)
	}
	var next time.Time
	for _, item := range items {
		if mb.ctx.Err() != nil {
			return time.Time{}
		}
		if item.NextAttempt.After(mb.now()) {
			if next.IsZero() || item.NextAttempt.Before(next) {
				next = item.NextAttempt
			}
			continue
		}
		if due := mb.attemptMail(item); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}

// attemptMail tries to leave item at one of its recipient's relays, and
// returns when to try again (zero when it is done, delivered or given up).
func (mb *Mail) attemptMail(item store.OutboxItem) time.Time {
	pid, err := peer.Decode(item.To)
	if err != nil {
		mb.abandonMail(item, fmt.Sprintf("the recipient %q is not a peer ID", item.To))
		return time.Time{}
	}
	relays := mb.liveFirst(mb.mailRelays(pid))
	var errs []string
	for _, r := range relays {
		id, expires, err := mb.publishMail(r, pid, item.Message)
		if err == nil {
			if err := mb.store.Mailboxes().DeleteOutbox(item.ID); err != nil {
				mb.log.Error("removing a delivered message from the outbox", "id", item.ID, "err", err)
			}
			mb.log.Info("left a message at a mailbox", "to", pid, "relay", r.ID, "message", item.ID, "mail_id", id)
			mb.events.Publish(events.Event{Type: events.EventMail, At: mb.now(), Peer: pid.String(),
				Detail: fmt.Sprintf("message %s left at relay %s (kept until %s)", item.ID, r.ID, expires)})
			return time.Time{}
		}
		var remote *wire.RemoteError
		if errors.As(err, &remote) && permanentMailError(remote.Body.Code) {
			mb.abandonMail(item, err.Error())
			return time.Time{}
		}
		errs = append(errs, err.Error())
	}
	if len(relays) == 0 {
		errs = append(errs, "the recipient names no mailbox relay")
	}
	item.Attempts++
	item.LastError = strings.Join(errs, "; ")
	wait := mb.retries[min(item.Attempts-1, len(mb.retries)-1)]
	item.NextAttempt = mb.now().Add(wait)
	if item.NextAttempt.Sub(item.Queued) > mb.cfg.Mailbox.GiveUp.Duration {
		mb.abandonMail(item, item.LastError)
		return time.Time{}
	}
	if err := mb.store.Mailboxes().PutOutbox(item); err != nil {
		mb.log.Error("updating the outbox", "id", item.ID, "err", err)
	}
	mb.log.Info("could not leave a message at a mailbox; will retry", "to", pid, "message", item.ID,
		"attempt", item.Attempts, "in", wait, "err", item.LastError)
	return item.NextAttempt
}

// permanentMailError: resending the same message cannot help (IFP-6 §7:
// no retry on client errors). A full or refusing mailbox can change, and
// so can a relay that is unavailable (its disk full, say).
func permanentMailError(c wire.Code) bool {
	switch c {
	case wire.CodeMailboxFull, wire.CodeMailboxRefused, wire.CodeRateLimited, wire.CodeInternal, wire.CodeUnavailable:
		return false
	}
	return true
}

func (mb *Mail) abandonMail(item store.OutboxItem, why string) {
	if err := mb.store.Mailboxes().DeleteOutbox(item.ID); err != nil {
		mb.log.Error("removing an undeliverable message from the outbox", "id", item.ID, "err", err)
	}
	mb.log.Warn("gave up on a message", "to", item.To, "message", item.ID, "attempts", item.Attempts, "err", why)
	mb.events.Publish(events.Event{Type: events.EventMail, At: mb.now(), Peer: item.To,
		Detail: fmt.Sprintf("gave up on message %s after %d attempts: %s", item.ID, item.Attempts, why)})
}

// exchange sends one request to a relay and reads its answer.
func (mb *Mail) exchange(ctx context.Context, relay peer.ID, req *wire.MailboxRequest) (*wire.MailboxResponse, error) {
	s, err := mb.host.NewStream(network.WithAllowLimitedConn(ctx, "mailbox"), relay, mailboxProtocol)
	if err != nil {
		return nil, fmt.Errorf("opening mailbox at %s: %w", relay, err)
	}
	defer s.Close()
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		s.Reset()
		return nil, fmt.Errorf("opening mailbox at %s: %w", relay, err)
	}
	ws := wire.NewStream(s, mb.cfg.Limits.StreamTimeout.Duration).WithBudget(mb.door.Budget(), relay)
	if err := ws.WriteMailbox(req); err != nil {
		s.Reset()
		return nil, fmt.Errorf("mailbox %s at %s: %w", req.Op, relay, err)
	}
	s.CloseWrite()
	raw, err := ws.ReadMailbox()
	if err != nil {
		s.Reset()
		return nil, fmt.Errorf("mailbox %s at %s: reading the answer: %w", req.Op, relay, err)
	}
	res, err := wire.DecodeMailboxResponse(raw)
	if err != nil {
		return nil, fmt.Errorf("mailbox %s at %s: %w", req.Op, relay, err)
	}
	if !res.OK {
		return nil, &wire.RemoteError{Peer: relay.String(), Body: *res.Error}
	}
	return res, nil
}

// publishMail leaves msg (CBOR) for to at relay.
func (mb *Mail) publishMail(relay peer.AddrInfo, to peer.ID, msg []byte) (id, expires string, err error) {
	ctx, cancel := context.WithTimeout(mb.ctx, mb.cfg.Limits.StreamTimeout.Duration)
	defer cancel()
	if err := mb.host.Connect(ctx, relay); err != nil {
		return "", "", fmt.Errorf("connecting to relay %s: %w", relay.ID, err)
	}
	res, err := mb.exchange(ctx, relay.ID, &wire.MailboxRequest{Op: wire.OpPublish, To: to.String(), Message: msg})
	if err != nil {
		return "", "", err
	}
	return res.ID, res.Expires, nil
}

// Fetch fetches, checks, audits and acknowledges the mail waiting at
// relay, until none is left.
func (mb *Mail) Fetch(relay peer.ID) {
	// One fetch per relay at a time. A fetch asked for while one runs there
	// (a poll, a notice that mail waits) may be for mail that came after
	// the running one's last retrieve: it runs once more when that ends.
	mb.fetchMu.Lock()
	if _, running := mb.fetching[relay]; running {
		mb.fetching[relay] = true
		mb.fetchMu.Unlock()
		return
	}
	mb.fetching[relay] = false
	mb.fetchMu.Unlock()
	for {
		mb.fetchAll(relay)
		mb.fetchMu.Lock()
		if again := mb.fetching[relay]; !again || mb.ctx.Err() != nil {
			delete(mb.fetching, relay)
			mb.fetchMu.Unlock()
			return
		}
		mb.fetching[relay] = false
		mb.fetchMu.Unlock()
	}
}

// fetchAll is one fetch: retrieve, accept and acknowledge until nothing
// more waits at relay.
func (mb *Mail) fetchAll(relay peer.ID) {
	for mb.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(mb.ctx, mb.cfg.Limits.StreamTimeout.Duration)
		res, err := mb.exchange(ctx, relay, &wire.MailboxRequest{Op: wire.OpRetrieve, Limit: wire.MaxMailBatch})
		cancel()
		if err != nil {
			if errors.Is(err, network.ErrReset) || errors.Is(err, p2phost.ErrProtocolNotSupported) {
				mb.log.Debug("relay holds no mailbox", "relay", relay, "err", err)
			} else {
				mb.log.Info("fetching mail", "relay", relay, "err", err)
			}
			return
		}
		var done []string
		taken := 0
		for _, mail := range res.Messages {
			if err := mb.Accept(relay, mail); err != nil {
				if errors.Is(err, admit.ErrAudit) {
					// Not acknowledged: it will come again once the
					// audit log can be written.
					mb.log.Error("could not audit mail; leaving it at the relay", "relay", relay, "err", err)
					continue
				}
				mb.log.Info("refused mail", "relay", relay, "mail_id", mail.ID, "err", err)
			} else {
				taken++
			}
			done = append(done, mail.ID)
		}
		if len(res.Messages) > 0 {
			mb.log.Info("fetched mail", "relay", relay, "messages", len(res.Messages), "accepted", taken, "more", res.More)
		}
		if len(done) > 0 {
			// The relay deletes what is acknowledged: it must be on disk here first.
			if err := mb.commit(); err != nil {
				mb.log.Error("could not commit fetched mail; leaving it at the relay", "relay", relay, "err", err)
				return
			}
			ctx, cancel := context.WithTimeout(mb.ctx, mb.cfg.Limits.StreamTimeout.Duration)
			_, err := mb.exchange(ctx, relay, &wire.MailboxRequest{Op: wire.OpAck, IDs: done})
			cancel()
			if err != nil {
				mb.log.Info("acknowledging mail", "relay", relay, "err", err)
				return
			}
		}
		if !res.More || len(done) == 0 {
			return
		}
	}
}

// Accept takes one fetched message through the door: the sender is
// whoever holds the key its signature names (and headers.from must be
// that key), not whoever relayed it; it must be addressed to this daemon
// and pass the mail replay window (mailbox.retention). Fetched mail is not
// rate limited here: this daemon fetched it at its own pace, and the
// relay's quotas bound what a sender can leave. An error wrapping errAudit
// means the message could not be recorded and must not be acknowledged.
func (mb *Mail) Accept(relay peer.ID, mail wire.Mail) error {
	m, err := gossip.DecodeCBOR(mail.Message)
	if err != nil {
		mb.door.Refused(ViaMailbox, "", false, nil, mail.Message, err)
		return err
	}
	note := "delivered by the mailbox at relay " + relay.String()
	in, err := mb.door.Admit(&admit.Arrival{Via: ViaMailbox, Msg: m, Addressed: true, Window: mb.mailReplay, Uncharged: true, Note: note})
	if err != nil {
		return err
	}
	mb.door.Publish(in, m.Headers.ConversationID, note)
	return nil
}

// handleMailbox serves one mailbox request at a relay.
func (mb *Mail) handleMailbox(s network.Stream) {
	defer s.Close()
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		s.Reset()
		return
	}
	pid := s.Conn().RemotePeer()
	ws := wire.NewStream(s, mb.cfg.Limits.StreamTimeout.Duration).WithBudget(mb.door.Budget(), pid)
	answer := func(res *wire.MailboxResponse) {
		if err := ws.WriteMailbox(res); err != nil {
			mb.log.Debug("answering a mailbox request", "peer", mb.named(pid), "err", err)
			s.Reset()
		}
	}
	fail := func(err error) {
		if refusal := admit.Unstored(err); refusal != err {
			// A full disk: unavailable and why, not the store's error
			// (which names its file); the sender keeps the mail and
			// tries again.
			mb.log.Warn("a mailbox request could not be stored: the disk is full; free space on it, nothing needs restarting", "peer", mb.named(pid), "err", err)
			err = refusal
		}
		body := wire.NewErrorBody(err)
		mb.log.Info("refused a mailbox request", "peer", mb.named(pid), "err", err)
		answer(&wire.MailboxResponse{Error: &body})
	}
	raw, err := ws.ReadMailbox()
	if err != nil {
		if !errors.Is(err, gossip.ErrFrameTooLarge) && !errors.Is(err, gossip.ErrTruncatedFrame) && !errors.Is(err, gossip.ErrEmptyFrame) {
			s.Reset()
			return
		}
		fail(err)
		return
	}
	req, err := wire.DecodeMailboxRequest(raw)
	if err != nil {
		fail(err)
		return
	}
	if err := mb.rates.Allow(pid, ""); err != nil {
		fail(err)
		return
	}
	now := mb.now()
	switch req.Op {
	case wire.OpPublish:
		res, err := mb.holdMail(pid, addressClass(s.Conn().RemoteMultiaddr()), req, now)
		if err != nil {
			fail(err)
			return
		}
		answer(res)
		if to, err := peer.Decode(req.To); err == nil {
			mb.tellWaiting(to)
		}
	case wire.OpRetrieve:
		// Fetching registers a peer that holds a slot here (making room
		// if the table is full); what waits for it is served either way.
		if mb.slots.Holds(pid) {
			evicted, err := mb.store.Mailboxes().RegisterMailbox(pid.String(), addressClass(s.Conn().RemoteMultiaddr()), now,
				store.MailboxLimits{Max: mb.maxMailboxes(), PerAddress: mailboxesPerAddress})
			if err != nil {
				mb.log.Warn("registering a mailbox", "peer", mb.named(pid), "err", err)
			} else if evicted != "" {
				mb.log.Info("the mailbox table is full; dropped the least recently used mailbox", "peer", mb.named(pid), "dropped", evicted)
			}
		}
		limit := wire.MaxMailBatch
		if req.Limit > 0 {
			limit = min(req.Limit, limit)
		}
		items, more, err := mb.store.Mailboxes().Mail(pid.String(), now, limit, mailBudget)
		if err != nil {
			fail(err)
			return
		}
		res := &wire.MailboxResponse{OK: true, More: more}
		for _, it := range items {
			res.Messages = append(res.Messages, wire.Mail{ID: it.ID, Message: it.Message})
		}
		answer(res)
	case wire.OpAck:
		acked, err := mb.store.Mailboxes().AckMail(pid.String(), req.IDs)
		if err != nil {
			fail(err)
			return
		}
		answer(&wire.MailboxResponse{OK: true, Acked: acked})
	}
}

// tellWaiting tells to, if it holds a slot here (and so is connected),
// that mail waits for it (wire.MailWaiting): one notice at a time per
// recipient, and one more when it ends if mail came meanwhile. The
// recipients told at once are at most the slot holders.
func (mb *Mail) tellWaiting(to peer.ID) {
	if !mb.slots.Holds(to) {
		return
	}
	mb.tellMu.Lock()
	if _, busy := mb.telling[to]; busy {
		mb.telling[to] = true
		mb.tellMu.Unlock()
		return
	}
	mb.telling[to] = false
	mb.tellMu.Unlock()
	started := mb.spawn(func() {
		for {
			mb.sendWaiting(to)
			mb.tellMu.Lock()
			if again := mb.telling[to]; !again || mb.ctx.Err() != nil {
				delete(mb.telling, to)
				mb.tellMu.Unlock()
				return
			}
			mb.telling[to] = false
			mb.tellMu.Unlock()
		}
	})
	if !started {
		mb.tellMu.Lock()
		delete(mb.telling, to)
		mb.tellMu.Unlock()
	}
}

// sendWaiting opens and closes one wire.MailWaiting stream to to, on the
// connection it holds (no dial).
func (mb *Mail) sendWaiting(to peer.ID) {
	ctx, cancel := context.WithTimeout(mb.ctx, mb.cfg.Limits.StreamTimeout.Duration)
	defer cancel()
	s, err := mb.host.NewStream(network.WithNoDial(ctx, "ifaced: mail waits for a connected recipient"), to, wire.MailWaiting)
	if err != nil {
		// An older daemon, or one that went away: it fetches at its poll.
		mb.log.Debug("telling a recipient that mail waits", "peer", mb.named(to), "err", err)
		return
	}
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		s.Reset()
		return
	}
	// Close reads the protocol choice's answer: bounded like any read.
	_ = s.SetDeadline(time.Now().Add(mb.cfg.Limits.StreamTimeout.Duration))
	if err := s.Close(); err != nil {
		mb.log.Debug("telling a recipient that mail waits", "peer", mb.named(to), "err", err)
	}
}

// holdMail checks and stores a published message.
func (mb *Mail) holdMail(from peer.ID, addr string, req *wire.MailboxRequest, now time.Time) (*wire.MailboxResponse, error) {
	to, err := peer.Decode(req.To)
	if err != nil {
		return nil, fmt.Errorf("%w: \"to\" %q is not a peer ID", gossip.ErrMalformed, req.To)
	}
	m, err := gossip.DecodeCBOR(req.Message)
	if err != nil {
		return nil, err
	}
	// Only the sender's own messages: the quota is charged to a key that
	// signed, and nobody can leave mail in another's name (its from must
	// be that key, as the recipient's door will require).
	pub, err := identity.PublicKeyFromPeerID(from)
	if err != nil {
		return nil, err
	}
	if did := identity.DIDKey(pub); m.Headers.From.Agent != did {
		return nil, fmt.Errorf("%w: headers.from is %q, but you are %s; from must name the signer", gossip.ErrWrongKey, m.Headers.From.Agent, did)
	}
	if err := m.Verify(pub); err != nil {
		return nil, err
	}
	retention := mb.cfg.Mailbox.Retention.Duration
	ok, err := mb.store.Mailboxes().MailboxOpen(to.String(), now.Add(-mb.cfg.Mailbox.Idle.Duration))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s has not fetched mail here while holding a slot in the last %s, and no mail waits for it",
			wire.ErrMailboxRefused, to, mb.cfg.Mailbox.Idle.Duration)
	}
	expires := now.Add(retention)
	// ttl_seconds may be up to 2^53-1; past the retention it changes
	// nothing, and capping it first keeps the multiplication in range.
	if ttl := min(m.Headers.TTLSeconds, int64(retention/time.Second)+1); ttl > 0 {
		date, err := time.Parse(time.RFC3339, m.Headers.Date)
		if err != nil {
			return nil, fmt.Errorf("%w: date %q: %v", gossip.ErrInvalidMessage, m.Headers.Date, err)
		}
		if end := date.Add(time.Duration(ttl) * time.Second); end.Before(expires) {
			expires = end
		}
	}
	if !now.Before(expires) {
		return nil, fmt.Errorf("%w: its ttl_seconds ran out before it arrived", gossip.ErrInvalidMessage)
	}
	if m.Trace == nil {
		m.Trace = &gossip.Trace{}
	}
	if len(m.Trace.Received) >= gossip.MaxTraceEntries {
		return nil, fmt.Errorf("%w: the trace already has %d entries", gossip.ErrInvalidMessage, len(m.Trace.Received))
	}
	m.Trace.Received = append(m.Trace.Received, gossip.TraceEntry{
		By: "relay:/p2p/" + mb.id.PeerID().String(), With: "libp2p+ifp-8", At: gossip.FormatDate(now), From: from.String()})
	held, err := gossip.EncodeCBOR(m)
	if err != nil {
		return nil, err
	}
	id, err := mb.store.Mailboxes().PutMail(store.MailItem{ID: gossip.NewID("mail", now), To: to.String(), From: from.String(),
		Addr: addr, MessageID: m.Headers.MessageID, Received: now, Expires: expires, Message: held}, mb.mailQuota())
	if errors.Is(err, store.ErrMailQuota) {
		return nil, fmt.Errorf("%w: %v", wire.ErrMailboxFull, err)
	}
	if err != nil {
		return nil, err
	}
	mb.log.Info("holding mail", "from", from, "to", to, "mail_id", id, "expires", expires.Format(time.RFC3339))
	return &wire.MailboxResponse{OK: true, ID: id, Expires: gossip.FormatDate(expires)}, nil
}

// maxMailboxes bounds the peers registered at once: every peer may hold
// a slot, and as many again may be away with mail waiting, several times
// over.
func (mb *Mail) maxMailboxes() int { return 4 * mb.cfg.Relay.MaxReservations }

// mailboxesPerAddress bounds the registrations made from one address (an
// IPv4 address, an IPv6 /64): four times the slots go-libp2p's relay lets
// one IP address hold at once, as the table is four times relay.max_reservations.
// Past it, an address's new registration takes the place of its own least
// recently used one, so one address fills at most 32 of the table's 512
// places (by default) and cannot push anyone else out.
var mailboxesPerAddress = 4 * relayv2.DefaultResources().MaxReservationsPerIP

// mailQuota is the relay's quotas (see the package comment above): half of
// max_total_mb is the shared pool, the other half one share per mailbox
// the table may hold.
func (mb *Mail) mailQuota() store.MailQuota {
	c := mb.cfg.Mailbox
	total := c.MaxTotalMB << 20
	share := total / 2 / mb.maxMailboxes()
	return store.MailQuota{MaxMessages: c.MaxMessages, MaxBytes: c.MaxKB << 10, MaxPerSender: c.MaxPerSender,
		MaxPerAddress: c.MaxPerAddress, MaxTotalBytes: total - share*mb.maxMailboxes(), Share: share}
}

// addressClass is what the per-address mail quota counts a sender by: its
// IPv4 address, or its IPv6 /64 (one subscriber's usual allocation); ""
// when the address carries no IP.
func addressClass(a multiaddr.Multiaddr) string {
	ip, err := manet.ToIP(a)
	if err != nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// Prune drops expired mail and lapsed registrations.
func (mb *Mail) Prune() {
	now := mb.now()
	dropped, err := mb.store.Mailboxes().PruneMail(now, now.Add(-mb.cfg.Mailbox.Idle.Duration))
	if err != nil {
		mb.log.Warn("pruning mail", "err", err)
		return
	}
	if dropped > 0 {
		mb.log.Info("dropped expired mail", "messages", dropped)
	}
}

// noReservation is how go-libp2p's circuit v2 client reports a relay's
// answer that the peer holds no slot there (client.dial: "error opening
// relay circuit: NO_RESERVATION (204)"); TestSendToAnAwayPeerQueuesAtOnce
// pins it to the go-libp2p in use.
var noReservation = pbv2.Status_name[int32(pbv2.Status_NO_RESERVATION)]

// awayProbe bounds the race of away.
const awayProbe = 10 * time.Second

// away races the two ways to reach a peer that is not connected: its
// direct addresses (the cache's, which for a peer behind a NAT are often
// LAN addresses nobody else can reach, whose dials only time out) and a
// circuit through each relay its document names. It returns why the peer
// is away when every one of those relays answers that the peer holds no
// slot there before a direct dial has connected: a peer that names
// relays keeps a slot on them while it runs, so its mail can be queued at
// once rather than after the direct dials time out (about 5 s each). nil
// means: greet as usual (connected, reached directly, reachable through a
// relay, or no clear answer). A circuit that opens is closed again; the
// greeting opens its own.
func (mb *Mail) away(ctx context.Context, pid peer.ID) error {
	if mb.host.Network().Connectedness(pid) != network.NotConnected {
		return nil
	}
	relays := mb.mailRelays(pid)
	sw, ok := mb.host.Network().(*swarm.Swarm)
	if len(relays) == 0 || !ok {
		return nil
	}
	p2phost.DialHints(mb.host, mb.store, pid)
	ctx, cancel := context.WithTimeout(ctx, awayProbe)
	defer cancel()
	defer context.AfterFunc(mb.ctx, cancel)() // the dials below end with the daemon too
	direct := make(chan error, 1)
	go func() {
		direct <- mb.host.Connect(network.WithForceDirectDial(ctx, "ifaced: send races direct and relayed dials"), peer.AddrInfo{ID: pid})
	}()
	type answer struct {
		relay peer.ID
		away  bool
	}
	answers := make(chan answer, len(relays))
	for _, r := range relays {
		go func() {
			answers <- answer{r.ID, mb.probeCircuit(ctx, sw, r, pid)}
		}()
	}
	var without []string
	for pending := len(relays); pending > 0; {
		select {
		case err := <-direct:
			if err == nil {
				return nil // reached directly
			}
			direct = nil // failed: the relays decide
		case a := <-answers:
			pending--
			if !a.away {
				return nil // reachable through this relay, or no clear answer
			}
			without = append(without, a.relay.String())
		case <-ctx.Done():
			return nil
		}
	}
	return fmt.Errorf("it holds no slot on its relays (%s), so it is away", strings.Join(without, ", "))
}

// probeCircuit opens a circuit to pid through relay and reports whether
// the relay answered that pid holds no slot there.
func (mb *Mail) probeCircuit(ctx context.Context, sw *swarm.Swarm, relay peer.AddrInfo, pid peer.ID) bool {
	for _, a := range relay.Addrs {
		addr := a.Encapsulate(multiaddr.StringCast("/p2p/" + relay.ID.String() + "/p2p-circuit"))
		tpt := sw.TransportForDialing(addr)
		if tpt == nil {
			return false
		}
		conn, err := tpt.Dial(ctx, addr, pid)
		if err == nil {
			conn.Close()
			return false
		}
		if strings.Contains(err.Error(), noReservation) {
			return true
		}
	}
	return false
}

// PruneRates forgets the mailbox request rates of peers idle long enough.
func (mb *Mail) PruneRates() { mb.rates.Prune() }

// HoldsSlot says whether pid holds a reservation slot on this relay.
func (mb *Mail) HoldsSlot(pid peer.ID) bool { return mb.slots.Holds(pid) }
