package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
)

func TestMailboxRequestsRoundTripAndRefuseWhatIsMissing(t *testing.T) {
	good := []*MailboxRequest{
		{Op: OpPublish, To: "12D3KooWExample", Message: []byte{0xa0}},
		{Op: OpRetrieve},
		{Op: OpRetrieve, Limit: 5},
		{Op: OpAck, IDs: []string{"mail_1"}},
	}
	for _, r := range good {
		b, err := EncodeMailbox(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeMailboxRequest(b)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		again, _ := EncodeMailbox(back)
		if !bytes.Equal(b, again) {
			t.Fatalf("%+v does not round-trip", r)
		}
	}
	bad := []struct {
		name string
		req  any
		want error
	}{
		{"unknown op", &MailboxRequest{Op: "steal"}, ErrMailboxUnknownOp},
		{"publish without recipient", &MailboxRequest{Op: OpPublish, Message: []byte{1}}, gossip.ErrMalformed},
		{"publish without message", &MailboxRequest{Op: OpPublish, To: "x"}, gossip.ErrMalformed},
		{"oversized message", &MailboxRequest{Op: OpPublish, To: "x", Message: make([]byte, MaxMailMessage+1)}, gossip.ErrTooLarge},
		{"negative limit", &MailboxRequest{Op: OpRetrieve, Limit: -1}, gossip.ErrMalformed},
		{"ack without ids", &MailboxRequest{Op: OpAck}, gossip.ErrMalformed},
		{"unknown field", map[string]any{"op": "retrieve", "sneaky": true}, gossip.ErrMalformed},
	}
	for _, c := range bad {
		b, err := EncodeMailbox(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeMailboxRequest(b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := DecodeMailboxRequest(append(mustEncode(t, &MailboxRequest{Op: OpRetrieve}), 0x00)); !errors.Is(err, gossip.ErrMalformed) {
		t.Errorf("trailing bytes: %v", err)
	}
	if _, err := DecodeMailboxResponse(mustEncode(t, &MailboxResponse{})); !errors.Is(err, gossip.ErrMalformed) {
		t.Errorf("a response neither ok nor an error: %v", err)
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := EncodeMailbox(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeMailbox(f *testing.F) {
	for _, v := range []any{
		&MailboxRequest{Op: OpPublish, To: "12D3KooWExample", Message: []byte{0xa0}},
		&MailboxRequest{Op: OpAck, IDs: []string{"a", "b"}},
		&MailboxResponse{OK: true, Messages: []Mail{{ID: "m", Message: []byte{1, 2}}}, More: true},
		&MailboxResponse{Error: &ErrorBody{Code: CodeMailboxFull, Message: "full"}},
	} {
		b, err := EncodeMailbox(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req *MailboxRequest
		var res *MailboxResponse
		var reqErr, resErr error
		withinFactor(t, len(b), func() { req, reqErr = DecodeMailboxRequest(b) })
		withinFactor(t, len(b), func() { res, resErr = DecodeMailboxResponse(b) })
		if reqErr == nil {
			if _, err := EncodeMailbox(req); err != nil {
				t.Fatalf("a decoded request does not encode: %v", err)
			}
		}
		if r, err := res, resErr; err == nil && !r.OK && r.Error == nil {
			t.Fatal("decoded a response that is neither ok nor an error")
		}
	})
}

// TestMailboxUnknownMemberNamed: a member this version does not speak (one
// a newer peer added) is refused, and the refusal names it and the
// members this version has, so the older side's owner and the newer
// side's log say what differs (before: "cbor: found unknown field at map
// element index 1").
func TestMailboxUnknownMemberNamed(t *testing.T) {
	for _, c := range []struct {
		name   string
		frame  any
		decode func([]byte) error
		want   []string
	}{
		{"request", map[string]any{"op": "retrieve", "since": "2026-11-29T00:00:00Z"},
			func(b []byte) error { _, err := DecodeMailboxRequest(b); return err },
			[]string{`member "since" is not part of /ifp/8/mailbox/1.0.0`, "a request has op, to, message, limit, ids", "newer version"}},
		{"response", map[string]any{"ok": true, "acked": 1, "quota_left": 5, "hint": "x"},
			func(b []byte) error { _, err := DecodeMailboxResponse(b); return err },
			[]string{`member "hint", "quota_left" is not part of /ifp/8/mailbox/1.0.0`, "a response has ok, id, expires, messages, more, acked, error"}},
		{"nested", map[string]any{"ok": false, "error": map[string]any{"code": "mailbox_full", "message": "m", "retry_in": 3}},
			func(b []byte) error { _, err := DecodeMailboxResponse(b); return err },
			[]string{"a member inside one of its values is not part of /ifp/8/mailbox/1.0.0"}},
	} {
		err := c.decode(mustEncode(t, c.frame))
		if !errors.Is(err, gossip.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
