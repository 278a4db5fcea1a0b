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

	mu    sync.Mutex
	codes map[[32]byte]time.Time // → expiry
	live  map[[32]byte]*session
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
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, codes: map[[32]byte]time.Time{}, live: map[[32]byte]*session{}}
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
	code, err := newSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, k)
		}
	}
	for len(s.codes) >= MaxCodes {
		var oldest [32]byte
		first := true
		for k, exp := range s.codes {
			if first || exp.Before(s.codes[oldest]) {
				oldest, first = k, false
			}
		}
		delete(s.codes, oldest)
	}
	exp := now.Add(CodeTTL)
	s.codes[sha256.Sum256([]byte(code))] = exp
	return code, exp, nil
}

// redeem exchanges a valid code for a new session, whose cookie value it
// returns; a code is gone once tried, valid or not.
func (s *sessions) redeem(code string) (string, bool, error) {
	k := sha256.Sum256([]byte(code))
	s.mu.Lock()
	exp, ok := s.codes[k]
	delete(s.codes, k)
	s.mu.Unlock()
	if !ok || !s.now().Before(exp) {
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
