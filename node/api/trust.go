package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Trust and introductions:
//
//	GET    /v1/trust                  every trust record: level, how it was reached, when, the last refusal
//	GET    /v1/trust/{peer}           one peer's (level 1, signed only, when there is no record)
//	POST   /v1/trust/{peer}           {"verify": fingerprint} | {"revoke": true} | {"check": true} | {"forget": true} → the peer's trust
//	POST   /v1/intros                 {"label", "expires_seconds", "disclosure", "persona"} → {"token", "id", "expires", …}
//	GET    /v1/intros                 the tokens minted here (without secrets) and those held from other daemons
//	DELETE /v1/intros/{id}            revoke a token minted here → the token
//	POST   /v1/intros/accept          {"token"} → the token now held
//
// A fingerprint that does not match the peer's key is a 400 on "verify"
// whose message shows both; an expired or mangled token is a 400 on
// "token"; an unknown token ID is a 404. A check that fetched nothing, or
// found the key unlisted, is not an error: the answer's check says why. A
// fetch that failed after a successful check does not replace it: the
// answer's check stays the success, check_failure holds the failure, and
// check_stands_until says until when the success counts.
//
// Each peer's trust says who revoked its key (revoked_by: "owner", or a
// statement signed by the key itself, "self", or by its successor,
// "successor", brought over revoked_via), the keys revoked with it
// (revoked_also), its class ("owner", "established", "stranger": whose
// records are bounded and evicted) and its key lifecycle records
// (key_events, each with its class). {"revoke": true} revokes the keys of
// the same identity too (successions followed between them);
// {"forget": true} forgets the peer's trust record and the key statements
// about its key, and its answer lists what went (forgot).

// TrustList is the answer of GET /v1/trust.
type TrustList struct {
	Peers []trust.Info `json:"peers"`
}

// TrustAction is the body of POST /v1/trust/{peer}: exactly one member.
type TrustAction struct {
	Verify string `json:"verify,omitempty"` // pin the key whose fingerprint (SHA256:…) this is
	Revoke bool   `json:"revoke,omitempty"` // revoke trust in the peer's key
	Check  bool   `json:"check,omitempty"`  // fetch the peer's identity document now
	Forget bool   `json:"forget,omitempty"` // forget the trust record and the key statements about the peer's key
}

// IntroRequest is the body of POST /v1/intros.
type IntroRequest struct {
	Label          string `json:"label"`
	ExpiresSeconds int64  `json:"expires_seconds,omitempty"` // 0: trust.intro_expiry
	Disclosure     string `json:"disclosure,omitempty"`
	Persona        string `json:"persona,omitempty"`
}

// IntroList is the answer of GET /v1/intros.
type IntroList struct {
	Issued []trust.IssuedIntroInfo `json:"issued"`
	Held   []trust.HeldIntroInfo   `json:"held"`
}

// AcceptIntroRequest is the body of POST /v1/intros/accept.
type AcceptIntroRequest struct {
	Token string `json:"token"`
}

// trustRoutes serves the owner's trust decisions on keys: trust records,
// pins, revocations, forgetting and document checks (GET and POST
// /v1/trust). A pin or a revocation is told to the event stream.
type trustRoutes struct {
	book        trustBook
	standing    standingNotifier
	names       peerNames
	peerTimeout time.Duration // a document check is one exchange with a peer
}

// trustBook is the trust records and the owner's decisions on keys
// (trust.Book).
type trustBook interface {
	trustLevels
	List() []trust.Info
	keyDecisions
}

// keyDecisions are what the owner decides of a peer's key (trust.Book).
type keyDecisions interface {
	PinKey(pid peer.ID, fingerprint string) (trust.Info, error)
	RevokeKey(pid peer.ID) (trust.Info, error)
	Forget(pid peer.ID) (trust.Info, error)
	Check(ctx context.Context, pid peer.ID) (trust.Info, error)
}

// introRoutes serves introduction tokens: minted here (POST and GET
// /v1/intros, DELETE /v1/intros/{id}) and held from other daemons (POST
// /v1/intros/accept). A revocation is told to the event stream.
type introRoutes struct {
	book     introBook
	held     heldIntros
	standing standingNotifier
}

// introBook is the introduction tokens this daemon minted (trust.Book).
type introBook interface {
	Introduce(req trust.IntroRequest) (trust.MintedIntro, error)
	IssuedIntros() ([]trust.IssuedIntroInfo, error)
	RevokeIntro(id string) (trust.IssuedIntroInfo, error)
}

// heldIntros are the tokens other daemons minted for this one
// (trust.Held).
type heldIntros interface {
	List() []trust.HeldIntroInfo
	Accept(token string) (trust.HeldIntroInfo, error)
}

func (s *trustRoutes) trustList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, TrustList{Peers: s.book.List()})
}

func (s *trustRoutes) peerTrust(w http.ResponseWriter, r *http.Request) {
	pid, e := s.names.resolve(r.PathValue("peer"))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.book.Peer(pid))
}

func (s *trustRoutes) trustPeer(w http.ResponseWriter, r *http.Request) {
	var req TrustAction
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	n := 0
	for _, set := range []bool{req.Verify != "", req.Revoke, req.Check, req.Forget} {
		if set {
			n++
		}
	}
	if n != 1 {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest,
			Message: `send exactly one of {"verify": fingerprint}, {"revoke": true}, {"check": true} or {"forget": true}`})
		return
	}
	pid, e := s.names.resolve(r.PathValue("peer"))
	if e != nil {
		writeError(w, e)
		return
	}
	var info trust.Info
	var err error
	switch {
	case req.Verify != "":
		info, err = s.book.PinKey(pid, req.Verify)
	case req.Revoke:
		info, err = s.book.RevokeKey(pid)
	case req.Forget:
		info, err = s.book.Forget(pid)
	default:
		ctx, cancel := context.WithTimeout(r.Context(), s.peerTimeout)
		defer cancel()
		info, err = s.book.Check(ctx, pid)
	}
	if err != nil {
		writeError(w, trustError(err))
		return
	}
	switch {
	case req.Verify != "":
		s.standing.StandingChanged(pid.String(), "the owner pinned its key")
	case req.Revoke:
		s.standing.StandingChanged(pid.String(), "the owner revoked its key")
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *introRoutes) introduce(w http.ResponseWriter, r *http.Request) {
	var req IntroRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.ExpiresSeconds < 0 || req.ExpiresSeconds > math.MaxInt64/int64(time.Second) {
		writeError(w, badField("expires_seconds", "%d: want a positive number of seconds (0 for the default)", req.ExpiresSeconds))
		return
	}
	m, err := s.book.Introduce(trust.IntroRequest{Label: req.Label, TTL: time.Duration(req.ExpiresSeconds) * time.Second,
		Disclosure: req.Disclosure, Persona: req.Persona})
	if err != nil {
		writeError(w, trustError(err))
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *introRoutes) intros(w http.ResponseWriter, r *http.Request) {
	issued, err := s.book.IssuedIntros()
	if err != nil {
		writeError(w, internal(err))
		return
	}
	held := s.held.List()
	if held == nil {
		held = []trust.HeldIntroInfo{}
	}
	writeJSON(w, http.StatusOK, IntroList{Issued: issued, Held: held})
}

func (s *introRoutes) revokeIntro(w http.ResponseWriter, r *http.Request) {
	info, err := s.book.RevokeIntro(r.PathValue("id"))
	if err != nil {
		writeError(w, trustError(err))
		return
	}
	s.standing.StandingChanged("", "the owner revoked an introduction token")
	writeJSON(w, http.StatusOK, info)
}

func (s *introRoutes) acceptIntro(w http.ResponseWriter, r *http.Request) {
	var req AcceptIntroRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Token == "" {
		writeError(w, badField("token", "is required: the string `ifaced introduce` printed on the issuer's side"))
		return
	}
	info, err := s.held.Accept(req.Token)
	if err != nil {
		writeError(w, trustError(err))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// trustError classifies the failure of a trust request.
func trustError(err error) *Error {
	var ie *trust.InputError
	switch {
	case errors.As(err, &ie):
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: ie.Field, Message: err.Error()}
	case errors.Is(err, trust.ErrNoSuchIntro):
		return notFound("%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: CodePeerTimeout, Message: err.Error()}
	}
	return internal(err)
}

// Trust lists the trust records.
func (c *Client) Trust(ctx context.Context) ([]trust.Info, error) {
	var out TrustList
	err := c.call(ctx, http.MethodGet, "/v1/trust", nil, &out)
	return out.Peers, err
}

// PeerTrust returns what the daemon established about one peer.
func (c *Client) PeerTrust(ctx context.Context, peer string) (*trust.Info, error) {
	var out trust.Info
	return &out, c.call(ctx, http.MethodGet, "/v1/trust/"+url.PathEscape(peer), nil, &out)
}

// TrustPeer pins, revokes, checks or forgets a peer's key.
func (c *Client) TrustPeer(ctx context.Context, peer string, a TrustAction) (*trust.Info, error) {
	var out trust.Info
	return &out, c.call(ctx, http.MethodPost, "/v1/trust/"+url.PathEscape(peer), a, &out)
}

// Introductions is the client of the introduction endpoints (/v1/intros):
// the tokens the daemon mints and those it holds for other daemons.
type Introductions struct{ c *Client }

// Introductions is the client of the introduction endpoints.
func (c *Client) Introductions() Introductions { return Introductions{c: c} }

// Mint mints an introduction token.
func (in Introductions) Mint(ctx context.Context, req IntroRequest) (*trust.MintedIntro, error) {
	var out trust.MintedIntro
	return &out, in.c.call(ctx, http.MethodPost, "/v1/intros", req, &out)
}

// List lists the tokens minted by the daemon and those it holds.
func (in Introductions) List(ctx context.Context) (*IntroList, error) {
	var out IntroList
	return &out, in.c.call(ctx, http.MethodGet, "/v1/intros", nil, &out)
}

// Revoke revokes a token the daemon minted.
func (in Introductions) Revoke(ctx context.Context, id string) (*trust.IssuedIntroInfo, error) {
	var out trust.IssuedIntroInfo
	return &out, in.c.call(ctx, http.MethodDelete, "/v1/intros/"+url.PathEscape(id), nil, &out)
}

// Accept stores a token another daemon minted for this one.
func (in Introductions) Accept(ctx context.Context, token string) (*trust.HeldIntroInfo, error) {
	var out trust.HeldIntroInfo
	return &out, in.c.call(ctx, http.MethodPost, "/v1/intros/accept", AcceptIntroRequest{Token: token}, &out)
}
