package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"sync"
	"time"
)

// Bounds of logging in.
const (
	CodeTTL     = 60 * time.Second // a login code's life
	SessionIdle = 12 * time.Hour   // a session ends after this long without a request
	MaxCodes    = 16               // login codes outstanding at once (the oldest goes first)
	MaxSessions = 32               // sessions at once (the one idle longest goes first)
	secretBytes = 32
)

// sessions owns who is logged in to the console: the one-time login
// codes minted for `ifaced ui`, and the sessions they are exchanged for,
// each with its CSRF token and a notice for its next page. It keeps them
// in memory only, so a restart logs everyone out, and holds each secret
// only as its SHA-256.
type sessions struct {
	now func() time.Time
	// gone is told the page file of each code that leaves (used, expired,
	// evicted or dropped), to remove it; nil when nobody asks for pages.
	gone func(page string)

	mu    sync.Mutex
	codes map[[32]byte]code
	live  map[[32]byte]*session
}

// code is a login code held: when it expires, and the page file that
// leads to it ("" if none was asked for).
type code struct {
	exp  time.Time
	page string
}

// session is one logged-in browser.
type session struct {
	csrf     string
	lastSeen time.Time
	notice   notice // shown once, on the next page rendered
}

// notice is what the last change did, for the page after its redirect.
type notice struct {
	Text  string
	Token string // an introduction token just minted, shown this once
	Warn  bool   // done, but with a consequence the owner must not miss (a revocation: its messages are now refused)
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, codes: map[[32]byte]code{}, live: map[[32]byte]*session{}}
}

func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a console secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// mintCode makes a login code, valid CodeTTL and once.
func (s *sessions) mintCode() (string, time.Time, error) {
	c, exp, err := s.newCode()
	if err != nil {
		return "", time.Time{}, err
	}
	return c, exp, s.holdCode(c, exp, "")
}

// newCode makes a code and the time it will expire, not yet held.
func (s *sessions) newCode() (string, time.Time, error) {
	c, err := newSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	return c, s.now().Add(CodeTTL), nil
}

// holdCode holds a code made by newCode, with the page file that leads
// to it (if any), making room as the bounds say.
func (s *sessions) holdCode(c string, exp time.Time, page string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireCodes()
	for len(s.codes) >= MaxCodes {
		var oldest [32]byte
		first := true
		for k, c := range s.codes {
			if first || c.exp.Before(s.codes[oldest].exp) {
				oldest, first = k, false
			}
		}
		s.dropCode(oldest)
	}
	s.codes[sha256.Sum256([]byte(c))] = code{exp: exp, page: page}
	return nil
}

// expireCodes forgets the codes past their expiry; s.mu is held.
func (s *sessions) expireCodes() {
	now := s.now()
	for k, c := range s.codes {
		if !now.Before(c.exp) {
			s.dropCode(k)
		}
	}
}

// dropCode forgets a code and has its page removed; s.mu is held.
func (s *sessions) dropCode(k [32]byte) {
	if c, ok := s.codes[k]; ok {
		delete(s.codes, k)
		if c.page != "" && s.gone != nil {
			s.gone(c.page)
		}
	}
}

// sweepCodes forgets the expired codes (their pages go with them).
func (s *sessions) sweepCodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireCodes()
}

// dropCodes forgets every code, as the console closes.
func (s *sessions) dropCodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.codes {
		s.dropCode(k)
	}
}

// redeem exchanges a valid code for a new session, whose cookie value it
// returns; a code is gone once tried, valid or not, and so is its page.
func (s *sessions) redeem(code string) (string, bool, error) {
	k := sha256.Sum256([]byte(code))
	s.mu.Lock()
	c, ok := s.codes[k]
	s.dropCode(k)
	s.mu.Unlock()
	if !ok || !s.now().Before(c.exp) {
		return "", false, nil
	}
	tok, err := newSecret()
	if err != nil {
		return "", false, err
	}
	csrf, err := newSecret()
	if err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	for len(s.live) >= MaxSessions {
		var idlest [32]byte
		first := true
		for k, se := range s.live {
			if first || se.lastSeen.Before(s.live[idlest].lastSeen) {
				idlest, first = k, false
			}
		}
		delete(s.live, idlest)
	}
	s.live[sha256.Sum256([]byte(tok))] = &session{csrf: csrf, lastSeen: s.now()}
	return tok, true, nil
}

// expire forgets the sessions idle for SessionIdle; s.mu is held.
func (s *sessions) expire() {
	now := s.now()
	for k, se := range s.live {
		if now.Sub(se.lastSeen) >= SessionIdle {
			delete(s.live, k)
		}
	}
}

// open returns the session of a cookie value and its CSRF token, and
// counts the request as activity; false when there is none (never made,
// ended, expired or evicted).
func (s *sessions) open(tok string) (csrf string, ok bool) {
	if tok == "" {
		return "", false
	}
	k := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.live[k]
	if !ok {
		return "", false
	}
	now := s.now()
	if now.Sub(se.lastSeen) >= SessionIdle {
		delete(s.live, k)
		return "", false
	}
	se.lastSeen = now
	return se.csrf, true
}

// checkCSRF reports whether got is the CSRF token of the session tok.
func (s *sessions) checkCSRF(tok, got string) bool {
	want, ok := s.open(tok)
	return ok && got != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// end logs a session out.
func (s *sessions) end(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, sha256.Sum256([]byte(tok)))
}

// setNotice keeps n for the session's next page.
func (s *sessions) setNotice(tok string, n notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se, ok := s.live[sha256.Sum256([]byte(tok))]; ok {
		se.notice = n
	}
}

// takeNotice returns the session's notice and forgets it.
func (s *sessions) takeNotice(tok string) notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.live[sha256.Sum256([]byte(tok))]
	if !ok {
		return notice{}
	}
	n := se.notice
	se.notice = notice{}
	return n
}

// count is the number of live sessions (for tests and the overview).
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	return len(s.live)
}
