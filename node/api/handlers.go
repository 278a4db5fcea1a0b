package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// statusRoutes answers GET /v1/status: what this daemon is, where it
// listens and how busy it is.
type statusRoutes struct {
	self  selfReport
	conns connections
	convs openConversations
	relay relayState
	home  string // the data directory
	addr  string // the API's TCP address
}

// selfReport is what the daemon says of itself (node.Node).
type selfReport interface {
	documentSource
	ID() *identity.Identity
	Addrs() []multiaddr.Multiaddr
	Started() time.Time
}

// relayState is how the daemon is reached: the relay service it runs,
// the relays it holds a slot on, what waits for a peer's mailbox
// (mail.Mail).
type relayState interface {
	RelayService() bool
	RelayReservations() []peer.ID
	Outbox() ([]store.OutboxItem, error)
}

func (g *statusRoutes) status(w http.ResponseWriter, r *http.Request) {
	id, doc := g.self.ID(), g.self.Document()
	st := Status{PeerID: id.PeerID().String(), DID: id.DID(), Fingerprint: id.Fingerprint(), Home: g.home,
		API: g.addr, Addrs: []string{}, Seq: doc.Seq, Capabilities: len(doc.Capabilities),
		Conversations: len(g.convs.Open()), ConnectedPeers: len(g.conns.Peers()),
		UptimeSeconds: int64(time.Since(g.self.Started()) / time.Second)}
	for _, a := range g.self.Addrs() {
		st.Addrs = append(st.Addrs, a.String())
	}
	st.RelayService, st.RelaySlots = g.relay.RelayService(), []string{}
	for _, r := range g.relay.RelayReservations() {
		st.RelaySlots = append(st.RelaySlots, r.String())
	}
	if items, err := g.relay.Outbox(); err == nil {
		st.Outbox = len(items)
	}
	st.Connections = []Connection{}
	for _, c := range g.conns.Conns() {
		if len(st.Connections) == MaxStatusConnections {
			break
		}
		st.Connections = append(st.Connections, Connection{Peer: c.RemotePeer().String(), Addr: c.RemoteMultiaddr().String(),
			Via: via(c.Stat().Limited), Direction: strings.ToLower(c.Stat().Direction.String())})
	}
	slices.SortFunc(st.Connections, func(a, b Connection) int { return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Addr, b.Addr)) })
	writeJSON(w, http.StatusOK, st)
}

// via names how a connection reaches its peer: "relay" for a limited
// (relayed) one, else "direct".
func via(limited bool) string {
	if limited {
		return "relay"
	}
	return "direct"
}

// live fills p's connection members from the host's open connections to
// pid: a peer reached only through a relay is connected, via relay.
func live(p *Peer, nw connections, pid peer.ID) {
	direct := false
	for _, c := range nw.ConnsToPeer(pid) {
		p.LiveAddrs = append(p.LiveAddrs, c.RemoteMultiaddr().String())
		direct = direct || !c.Stat().Limited
	}
	slices.Sort(p.LiveAddrs)
	if len(p.LiveAddrs) > 0 {
		p.Connected, p.Via = true, via(!direct)
	}
}

// peerRoutes serve the peers this daemon knows or is connected to (GET
// /v1/peers, GET /v1/peers/{peer}), connecting to one (POST /v1/connect),
// and the view one showed this daemon (GET /v1/caps/{peer}).
type peerRoutes struct {
	cache   peerCache
	conns   connections
	dial    dialer
	names   peerNames
	timeout time.Duration // one exchange with a peer
}

// dialer reaches peers: a connection by address, and a capabilities
// query, which also marks the peer as one the owner asked for
// (node.Node).
type dialer interface {
	reacher
	Connect(ctx context.Context, addr string) (peer.ID, error)
	QueryCapabilities(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*converse.GreetResult, error)
}

func (g *peerRoutes) peers(w http.ResponseWriter, r *http.Request) {
	recs, err := g.cache.CachedPeers()
	if err != nil {
		writeError(w, internal(err))
		return
	}
	now, nw := time.Now(), g.conns
	out := PeerList{Peers: []Peer{}}
	cached := map[peer.ID]bool{}
	for _, rec := range recs {
		p := Peer{PeerID: rec.PeerID, AgentID: rec.AgentID, Display: rec.Display, Seq: rec.Seq,
			AgeSeconds: int64(rec.Age(now) / time.Second), Stale: rec.Age(now) > StaleAfter, Cached: true, Addrs: rec.Addrs}
		if pid, err := peer.Decode(rec.PeerID); err == nil {
			cached[pid] = true
			live(&p, nw, pid)
		}
		out.Peers = append(out.Peers, p)
	}
	// A peer connected but not yet greeted has no view, but a person who
	// just ran `ifaced connect` expects to see it.
	var fresh []Peer
	for _, pid := range nw.Peers() {
		if cached[pid] {
			continue
		}
		p := Peer{PeerID: pid.String()}
		live(&p, nw, pid)
		p.Addrs = p.LiveAddrs
		fresh = append(fresh, p)
	}
	slices.SortFunc(fresh, func(a, b Peer) int { return cmp.Compare(a.PeerID, b.PeerID) })
	out.Peers = append(out.Peers, fresh...)
	writeJSON(w, http.StatusOK, out)
}

// peer answers GET /v1/peers/{peer}: that peer's entry of GET /v1/peers,
// from the cache and the connections alone. It never asks the peer (GET
// /v1/caps/{peer} does when no view is cached), so what shows a peer's
// name, such as the console's live events, can look one up without
// reading the whole cache or greeting it; not_found when the daemon
// neither holds a view of the peer nor is connected to it.
func (g *peerRoutes) peer(w http.ResponseWriter, r *http.Request) {
	pid, e := g.names.resolve(r.PathValue("peer"))
	if e != nil {
		writeError(w, e)
		return
	}
	rec, err := g.cache.CachedPeer(pid)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		writeError(w, internal(err))
		return
	}
	var p Peer
	if err == nil {
		now := time.Now()
		p = Peer{PeerID: rec.PeerID, AgentID: rec.AgentID, Display: rec.Display, Seq: rec.Seq,
			AgeSeconds: int64(rec.Age(now) / time.Second), Stale: rec.Age(now) > StaleAfter, Cached: true, Addrs: rec.Addrs}
		live(&p, g.conns, pid)
	} else {
		p = Peer{PeerID: pid.String()}
		live(&p, g.conns, pid)
		if !p.Connected {
			writeError(w, notFound("peer %s: no readable view of it is cached and it is not connected (GET /v1/caps/%s asks it)", pid, pid))
			return
		}
		p.Addrs = p.LiveAddrs
	}
	writeJSON(w, http.StatusOK, p)
}

func (g *peerRoutes) connect(w http.ResponseWriter, r *http.Request) {
	var req ConnectRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Addr == "" {
		writeError(w, badField("addr", "is required: a multiaddr ending in /p2p/<peer ID>"))
		return
	}
	ma, err := multiaddr.NewMultiaddr(req.Addr)
	if err != nil {
		writeError(w, badField("addr", "%q is not a multiaddr: %v", req.Addr, err))
		return
	}
	if _, err := peer.AddrInfoFromP2pAddr(ma); err != nil {
		writeError(w, badField("addr", "%q must end in /p2p/<peer ID>", req.Addr))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	pid, err := g.dial.Connect(ctx, req.Addr)
	if err != nil {
		e := peerFailure(err)
		if e.Code == CodePeerFailed {
			e.Code = CodePeerUnreachable
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, ConnectResult{Peer: pid.String()})
}

func (g *peerRoutes) peerCaps(w http.ResponseWriter, r *http.Request) {
	pid, e := g.names.resolve(r.PathValue("peer"))
	if e != nil {
		writeError(w, e)
		return
	}
	refresh := false
	if v := r.URL.Query().Get("refresh"); v != "" {
		var err error
		if refresh, err = strconv.ParseBool(v); err != nil {
			writeError(w, badField("refresh", "%q: want 1 or 0", v))
			return
		}
	}
	rec, err := g.cache.CachedPeer(pid)
	cached := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		writeError(w, internal(err))
		return
	}
	source := SourceCache
	if refresh || !cached {
		if e := reachable(g.dial, pid); e != nil {
			writeError(w, e)
			return
		}
		// Ask under the context last negotiated: a view is signed per seq
		// and context, and the same seq seen under another context would
		// look to the cache like a second document with that seq.
		var prop negotiate.Proposal
		if g := grantedIn(rec); cached && g != nil {
			prop = negotiate.Proposal{Disclosure: g.Disclosure, Persona: g.Persona, Temperature: g.Temperature}
		}
		ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
		defer cancel()
		if _, err := g.dial.QueryCapabilities(ctx, pid, prop); err != nil {
			writeError(w, peerFailure(fmt.Errorf("asking %s for its capabilities: %w", pid, err)))
			return
		}
		if rec, err = g.cache.CachedPeer(pid); err != nil {
			writeError(w, internal(err))
			return
		}
		source = SourceQuery
	}
	view, err := negotiate.DecodeView(json.RawMessage(rec.View))
	if err != nil {
		writeError(w, internal(fmt.Errorf("reading the cached view of %s: %w", pid, err)))
		return
	}
	age := rec.Age(time.Now())
	writeJSON(w, http.StatusOK, PeerCaps{PeerID: rec.PeerID, AgentID: rec.AgentID, Display: rec.Display, Seq: rec.Seq,
		FetchedAt: rec.FetchedAt, AgeSeconds: int64(age / time.Second), Stale: age > StaleAfter, Source: source,
		GrantedToUs: grantedIn(rec), View: view})
}

// grantedIn is the context the peer granted when it sent its cached view.
func grantedIn(rec store.PeerRecord) *negotiate.Granted {
	if len(rec.Context) == 0 {
		return nil
	}
	var g negotiate.Granted
	if err := json.Unmarshal(rec.Context, &g); err != nil {
		return nil // a context we cannot read tells the owner nothing
	}
	return &g
}

// capRoutes serve the owner's capabilities: the signed document (GET
// /v1/caps), the run-time additions and removals kept across restarts
// (POST /v1/caps, DELETE /v1/caps/{name}), and where each capability comes
// from (GET /v1/document).
type capRoutes struct {
	doc documentSource
	own ownCapabilities
}

// ownCapabilities is where the owner's capabilities come from, and its
// run-time changes to them (owner.Capabilities).
type ownCapabilities interface {
	Add(caps []negotiate.Capability) (*negotiate.Document, error)
	Remove(name string) (*negotiate.Document, error)
	Origins() (*negotiate.Document, []owner.CapabilityOrigin, []string, []owner.LeftOutCapability)
}

func (g *capRoutes) ownCaps(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, g.doc.Document())
}

// addCap adds one capability (an object) or several (an array of them),
// all or none, kept across restarts (owner.Capabilities).
func (g *capRoutes) addCap(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
			Message: fmt.Sprintf("the request body is over %d bytes", MaxBody)})
		return
	}
	if err != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "reading the request body: " + err.Error()})
		return
	}
	var caps []negotiate.Capability
	list := bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("["))
	if list {
		err = negotiate.DecodeStrict(raw, negotiate.FormatJSON, "", &caps)
	} else {
		var c negotiate.Capability
		err = negotiate.DecodeStrict(raw, negotiate.FormatJSON, "", &c)
		caps = []negotiate.Capability{c}
	}
	if err != nil {
		writeError(w, capabilityError(err, nil))
		return
	}
	if list && len(caps) == 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "the list holds no capability: send one capability object or an array of them"})
		return
	}
	if len(caps) > negotiate.MaxCapabilities {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest,
			Message: fmt.Sprintf("the list holds %d capabilities, a document at most %d", len(caps), negotiate.MaxCapabilities)})
		return
	}
	doc, err := g.own.Add(caps)
	switch {
	case errors.Is(err, owner.ErrCapabilityExists):
		field := "name"
		if list {
			cur := g.doc.Document()
			for i, c := range caps {
				if _, ok := cur.Capability(c.Name); ok {
					field = fmt.Sprintf("[%d].name", i)
					break
				}
			}
		}
		writeError(w, &Error{Status: http.StatusConflict, Code: CodeConflict, Field: field, Message: err.Error()})
	case errors.Is(err, negotiate.ErrInvalidDocument):
		// Fields are named as in the body: "name" for one capability,
		// "[1].name" in a list.
		writeError(w, capabilityError(err, func(i int) string {
			if !list {
				return ""
			}
			return fmt.Sprintf("[%d]", i)
		}))
	case err != nil:
		writeError(w, internal(fmt.Errorf("adding capability: %w", err)))
	default:
		writeJSON(w, http.StatusOK, doc)
	}
}

// capabilityError turns validation problems into a 400. at, when not
// nil, names capabilities[i] of the new document as it was in the body
// (its prefix there), so that fields are named as they were sent.
func capabilityError(err error, at func(i int) string) *Error {
	e := &Error{Status: http.StatusBadRequest, Code: CodeBadRequest}
	var msgs []string
	for _, p := range negotiate.Errors(err) {
		var fe *negotiate.FieldError
		if !errors.As(p, &fe) {
			msgs = append(msgs, p.Error())
			continue
		}
		f := *fe
		if at != nil {
			if rest, ok := strings.CutPrefix(f.Field, "capabilities["); ok {
				if num, after, ok := strings.Cut(rest, "]"); ok {
					if i, err := strconv.Atoi(num); err == nil {
						prefix := at(i)
						after = strings.TrimPrefix(after, ".")
						switch {
						case prefix == "":
							f.Field = after
						case after == "":
							f.Field = prefix
						default:
							f.Field = prefix + "." + after
						}
					}
				}
			}
		}
		if e.Field == "" {
			e.Field = f.Field
		}
		msgs = append(msgs, f.Error())
	}
	e.Message = "invalid capability: " + strings.Join(msgs, "; ")
	return e
}

// removeCap removes a capability, kept removed across restarts; a tool
// of the MCP server is a 409 that says how to restrict it instead.
func (g *capRoutes) removeCap(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	doc, err := g.own.Remove(name)
	switch {
	case errors.Is(err, owner.ErrNoCapability):
		writeError(w, notFound("%v", err))
	case errors.Is(err, owner.ErrMCPTool):
		writeError(w, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()})
	case err != nil:
		writeError(w, internal(fmt.Errorf("removing capability %q: %w", name, err)))
	default:
		writeJSON(w, http.StatusOK, doc)
	}
}

// ownDocument is the owner's document with where each capability comes
// from.
func (g *capRoutes) ownDocument(w http.ResponseWriter, r *http.Request) {
	doc, origins, removed, leftOut := g.own.Origins()
	writeJSON(w, http.StatusOK, OwnDocument{Document: doc, Origins: origins, Removed: removed, LeftOut: leftOut})
}

// conversationRoutes serve the owner's side of conversations: greeting a
// peer, the open conversations, saying something in one or closing it
// (conversations.go), and invoking a peer's capability (invoke.go).
type conversationRoutes struct {
	talk    talker
	table   conversationTable
	names   peerNames
	timeout time.Duration // one exchange with a peer
}

// talker greets peers and speaks in open conversations (node.Node, whose
// Greet also marks the peer as one the owner asked for).
type talker interface {
	reacher
	Greet(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*converse.GreetResult, error)
	Say(convID string, phase gossip.Phase, text string, parts ...gossip.Part) (*gossip.Message, error)
}

// conversationTable is the open conversations and the requests made in
// them (converse.Conversations).
type conversationTable interface {
	openConversations
	Newest(pid peer.ID) string
	InvokeIn(ctx context.Context, pid peer.ID, convID, capability string, params any) (*converse.InvokeResult, error)
}

func (g *conversationRoutes) greet(w http.ResponseWriter, r *http.Request) {
	var req GreetRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Peer == "" {
		writeError(w, badField("peer", "is required: a peer ID"))
		return
	}
	if req.Temperature != "" {
		if _, ok := conditions.TemperatureRank(req.Temperature); !ok {
			writeError(w, badField("temperature", "%q: want cool, warm or hot", req.Temperature))
			return
		}
	}
	for i, c := range req.ToolCategories {
		if !negotiate.ValidToolCategory(c) {
			writeError(w, badField(fmt.Sprintf("tool_categories[%d]", i), "%q is not a tool category (want one of %s, or custom:<name>)",
				c, strings.Join(negotiate.ToolCategories, ", ")))
			return
		}
	}
	pid, e := g.livePeer(req.Peer)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	res, err := g.talk.Greet(ctx, pid, negotiate.Proposal{Disclosure: req.Disclosure, Persona: req.Persona,
		Temperature: req.Temperature, ToolCategories: req.ToolCategories})
	if err != nil {
		writeError(w, peerFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (g *conversationRoutes) conversations(w http.ResponseWriter, r *http.Request) {
	cs := g.table.Open()
	slices.SortFunc(cs, func(a, b converse.ConversationInfo) int { return cmp.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, ConversationList{Conversations: cs})
}

func (g *conversationRoutes) open(convID string) bool { return isOpen(g.table, convID) }

func (g *conversationRoutes) say(w http.ResponseWriter, r *http.Request) {
	var req SayRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.ConversationID == "" && req.Peer != "" {
		pid, e := g.names.resolve(req.Peer)
		if e != nil {
			writeError(w, e)
			return
		}
		if req.ConversationID = g.table.Newest(pid); req.ConversationID == "" {
			writeError(w, notFound("no open conversation with %s (greet it first; `ifaced conversations` lists the open ones)", req.Peer))
			return
		}
	}
	switch {
	case req.ConversationID == "":
		writeError(w, badField("conversation_id", "is required (or peer: its newest open conversation)"))
		return
	case req.Phase == "":
		writeError(w, badField("phase", "is required (context, probe, recommend or close)"))
		return
	case !req.Phase.Valid():
		writeError(w, badField("phase", "%q is not a phase (want context, probe, recommend or close)", req.Phase))
		return
	case req.Phase == gossip.PhaseGreeting:
		writeError(w, badField("phase", "a greeting opens a conversation: use greet"))
		return
	case strings.TrimSpace(req.Text) == "" && req.Phase != gossip.PhaseClose:
		writeError(w, badField("text", "is required"))
		return
	}
	if !g.open(req.ConversationID) {
		writeError(w, notFound("no open conversation %q (greet the peer first; `ifaced audit` lists past ones)", req.ConversationID))
		return
	}
	m, err := g.talk.Say(req.ConversationID, req.Phase, req.Text)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, m)
	case errors.Is(err, gossip.ErrConversationClosed), errors.Is(err, gossip.ErrUnexpectedPhase), errors.Is(err, gossip.ErrOutOfSequence):
		writeError(w, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()})
	case !g.open(req.ConversationID):
		writeError(w, notFound("conversation %q ended: %v", req.ConversationID, err))
	default:
		writeError(w, peerFailure(err))
	}
}

// auditRoutes list the conversations the audit log recorded, and one
// conversation's entries (GET /v1/audit).
type auditRoutes struct {
	log   conversationLog
	names peerNames
	warn  *slog.Logger
}

// conversationLog is the audit log read by conversation (gossip.AuditLog).
type conversationLog interface {
	Flush() error
	Conversations() ([]gossip.AuditConversation, error)
	Entries(conversationID string) ([]gossip.AuditEntry, error)
}

func (g *auditRoutes) audit(w http.ResponseWriter, r *http.Request) {
	// The .md files named in the answer hold everything recorded so far.
	if err := g.log.Flush(); err != nil {
		g.warn.Warn("rendering the audit log's .md files", "err", err)
	}
	q := r.URL.Query()
	list, listErr := g.log.Conversations()
	if id := q.Get("conversation"); id != "" {
		entries, err := g.log.Entries(id)
		if errors.Is(err, fs.ErrNotExist) {
			writeError(w, notFound("the audit log has no conversation %q", id))
			return
		}
		out := AuditConversation{ConversationID: id, Entries: entries}
		if err != nil && !errors.Is(err, gossip.ErrTornAuditLine) {
			writeError(w, internal(err))
			return
		}
		if err != nil {
			out.Warning = err.Error()
		}
		if out.Entries == nil {
			out.Entries = []gossip.AuditEntry{}
		}
		for _, c := range list {
			if c.ID == id {
				out.File = c.File
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if listErr != nil && list == nil {
		writeError(w, internal(listErr))
		return
	}
	out := AuditList{Conversations: []gossip.AuditConversation{}}
	if listErr != nil {
		out.Warning = listErr.Error()
	}
	want := q.Get("peer")
	if want != "" {
		// A name the cache knows stands for its peer ID; anything else is
		// matched as written (an HTTP caller, say).
		if pid, e := g.names.resolve(want); e == nil {
			want = pid.String()
		}
	}
	for _, c := range list {
		if want == "" || slices.Contains(c.Peers, want) {
			out.Conversations = append(out.Conversations, c)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// eventRoutes serve the local agent: the event stream (GET /v1/events)
// and its answers to the invocations on it (invoke.go).
type eventRoutes struct {
	hub       eventHub
	done      <-chan struct{} // closed when the server closes
	write     time.Duration   // bounds each write to the stream
	heartbeat time.Duration   // between comment lines on an idle stream
	log       *slog.Logger
}

// eventHub is the daemon's event stream, and the answers the local agent
// gives to the invocations on it (node.Node).
type eventHub interface {
	Subscribe(opts ...events.SubscribeOption) (<-chan events.Event, func())
	AnswerInvocation(id string, ans events.InvocationAnswer) error
}

func (g *eventRoutes) events(w http.ResponseWriter, r *http.Request) {
	// Subscribe before the headers go out: a client that has them misses
	// nothing from then on.
	var opts []events.SubscribeOption
	switch role := r.URL.Query().Get("role"); role {
	case "", "agent":
	case "observer":
		opts = append(opts, events.AsObserver())
	default:
		writeError(w, badField("role", "%q is not a role: want agent (the default: invocations wait for its answer) or observer (follows events only)", role))
		return
	}
	ch, stop := g.hub.Subscribe(opts...)
	defer stop()
	rc := http.NewResponseController(w)
	// The stream outlives the server's read and write timeouts by design;
	// each write gets its own deadline instead, so a client that stops
	// reading cannot hold the handler forever.
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		writeError(w, internal(fmt.Errorf("streaming events: %w", err)))
		return
	}
	write := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(g.write)); err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !write(": subscribed\n\n") {
		return
	}
	tick := time.NewTicker(g.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-g.done:
			return
		case <-tick.C:
			if !write(": heartbeat\n\n") {
				return
			}
		case ev, ok := <-ch:
			if !ok {
				return // dropped: the hub sent events_lost first
			}
			data, err := json.Marshal(ev)
			if err != nil {
				g.log.Warn("encoding event", "type", ev.Type, "err", err)
				continue
			}
			if !write("event: %s\ndata: %s\n\n", ev.Type, data) {
				return
			}
		}
	}
}

// peerNames reads the peer references requests carry (resolve).
type peerNames struct {
	cache peerCache
	trust trustLevels
}

// resolve reads a peer reference: a peer ID, a did:key (which is the
// peer's key, so names its peer ID), or an agent ID or display name the
// peer cache holds for exactly one peer.
func (pn peerNames) resolve(ref string) (peer.ID, *Error) {
	if pid, err := peer.Decode(ref); err == nil {
		return pid, nil
	}
	if strings.HasPrefix(ref, "did:key:") {
		pub, err := identity.PublicKeyFromDID(ref)
		if err != nil {
			return "", badField("peer", "%v", err)
		}
		pid, err := identity.PeerIDFromPublicKey(pub)
		if err != nil {
			return "", badField("peer", "%v", err)
		}
		return pid, nil
	}
	recs, err := pn.cache.CachedPeers()
	if err != nil {
		return "", internal(err)
	}
	// A peer's agent ID names it only once this daemon established it
	// (level 3, bound); a claimed agent ID or display name could be anyone's.
	var found []peer.ID
	for _, rec := range recs {
		if rec.AgentID != ref {
			continue
		}
		pid, err := peer.Decode(rec.PeerID)
		if err == nil && pn.trust.Peer(pid).AgentID == ref {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return "", notFound("unknown peer %q: name a peer by its peer ID or did:key (an agent ID works once this daemon has verified it, level 3)", ref)
	case 1:
		return found[0], nil
	}
	return "", &Error{Status: http.StatusConflict, Code: CodeConflict,
		Message: fmt.Sprintf("%d cached peers answer to %q; name one by its peer ID", len(found), ref)}
}

// reachable checks that the daemon has a way to reach pid: a connection,
// addresses in the peerstore, or addresses in the peer cache (which it
// hands the peerstore, so a peer greeted before a restart can be reached
// by its ID alone).
func reachable(r reacher, pid peer.ID) *Error {
	if r.Reachable(pid) {
		return nil
	}
	return notFound("unknown peer %s: not connected and no address known (connect to it first: ifaced connect MULTIADDR)", pid)
}

// peerFailure classifies the failure of an exchange with a peer.
func peerFailure(err error) *Error {
	var re *wire.RemoteError
	var ne net.Error
	switch {
	case errors.As(err, &re):
		body := re.Body
		return &Error{Status: http.StatusBadGateway, Code: CodePeerError, Message: err.Error(), PeerError: &body}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &Error{Status: http.StatusGatewayTimeout, Code: CodePeerTimeout, Message: err.Error()}
	}
	return &Error{Status: http.StatusBadGateway, Code: CodePeerFailed, Message: err.Error()}
}
