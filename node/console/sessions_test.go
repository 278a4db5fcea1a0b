package console

import (
	"testing"
	"time"
)

// TestSessionBounds: at most MaxCodes codes and MaxSessions sessions are
// held; the oldest code and the session idle longest make room; a code
// is spent by any attempt; a notice is shown once.
func TestSessionBounds(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newSessions(clock.now)

	var codes []string
	for range MaxCodes + 1 {
		c, _, err := s.mintCode()
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c)
		clock.advance(time.Second)
	}
	if len(s.codes) != MaxCodes {
		t.Errorf("%d codes held, want %d", len(s.codes), MaxCodes)
	}
	if _, ok, _ := s.redeem(codes[0]); ok {
		t.Error("the oldest code still opened a session after MaxCodes newer ones")
	}
	tok, ok, err := s.redeem(codes[1])
	if err != nil || !ok {
		t.Fatalf("a live code: %v %v", ok, err)
	}
	if _, ok, _ := s.redeem(codes[1]); ok {
		t.Error("a code opened a second session")
	}
	if _, ok := s.open(tok); !ok {
		t.Error("the new session is not open")
	}

	// Fill the sessions; the first one (tok) is used again, so another
	// is the idlest when one more comes.
	var toks []string
	for i := range MaxSessions - 1 {
		clock.advance(time.Second)
		c, _, _ := s.mintCode()
		nt, ok, _ := s.redeem(c)
		if !ok {
			t.Fatalf("session %d not opened", i)
		}
		toks = append(toks, nt)
	}
	clock.advance(time.Second)
	s.open(tok)
	c, _, _ := s.mintCode()
	if _, ok, _ := s.redeem(c); !ok {
		t.Fatal("a session beyond MaxSessions was not opened")
	}
	if n := s.count(); n != MaxSessions {
		t.Errorf("%d sessions, want %d", n, MaxSessions)
	}
	if _, ok := s.open(toks[0]); ok {
		t.Error("the session idle longest was not the one evicted")
	}
	if _, ok := s.open(tok); !ok {
		t.Error("a session in use was evicted")
	}

	s.setNotice(tok, notice{Text: "done", Token: "secret"})
	if n := s.takeNotice(tok); n.Text != "done" || n.Token != "secret" {
		t.Errorf("notice %+v", n)
	}
	if n := s.takeNotice(tok); n != (notice{}) {
		t.Errorf("a notice shown twice: %+v", n)
	}
	if s.checkCSRF(tok, "") || s.checkCSRF("", "x") {
		t.Error("an empty token or session passed the CSRF check")
	}
	csrf, _ := s.open(tok)
	if !s.checkCSRF(tok, csrf) || s.checkCSRF(toks[1], csrf) {
		t.Error("a session's CSRF token is not its own alone")
	}
	s.end(tok)
	if _, ok := s.open(tok); ok || s.checkCSRF(tok, csrf) {
		t.Error("an ended session is still open")
	}
}
