package gossip

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

// TestRefusalExcerptIsAtMost2KiB: the excerpt a refusal summary keeps is
// at most RefusalExcerpt bytes as the record of refusals holds it — a
// JSON string, quotes, escapes and the "…" of a cut included — whatever
// the refused bytes hold: plain text, characters JSON escapes, multi-byte
// runes, binary (hex), or a message known only decoded.
func TestRefusalExcerptIsAtMost2KiB(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	decoded := sampleMessage(alice, bob)
	decoded.Body.Text = strings.Repeat(`"quoted"\`, 400)
	cases := map[string]struct {
		m   *Message
		raw []byte
	}{
		"plain":         {raw: []byte(strings.Repeat("a", 5000))},
		"just 2 KiB":    {raw: []byte(strings.Repeat("a", RefusalExcerpt))},
		"quotes":        {raw: []byte(strings.Repeat(`"`, 5000))},
		"control":       {raw: []byte(strings.Repeat("\x01\b", 3000))},
		"line breaks":   {raw: []byte(strings.Repeat("\u2028\n", 3000))},
		"runes":         {raw: []byte(strings.Repeat("€😀", 3000))},
		"binary":        {raw: append([]byte{0xa3, 0x00, 0xff}, make([]byte, 5000)...)},
		"decoded":       {m: decoded},
		"short":         {raw: []byte(`{"ifp":4}`)},
		"short escaped": {raw: []byte("\x01\x02")},
	}
	for name, c := range cases {
		r := Refusal{At: testNow, Transport: "test " + name, Code: "invalid_format", Reason: name}
		SummariseRefusal(&r, c.m, c.raw)
		if err := a.RecordRefusal(r); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, testNow.Format(auditDayLayout), refusedName+auditJSONLExt))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d refusals recorded, want %d", len(lines), len(cases))
	}
	for _, line := range lines {
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &members); err != nil {
			t.Fatal(err)
		}
		var name, excerpt string
		json.Unmarshal(members["transport"], &name)
		json.Unmarshal(members["excerpt"], &excerpt)
		if n := len(members["excerpt"]); n > RefusalExcerpt || n < 3 {
			t.Errorf("%s: the excerpt takes %d bytes in the record, want 1 to %d", name, n, RefusalExcerpt)
		}
		if strings.HasSuffix(name, "short") && excerpt != `{"ifp":4}` {
			t.Errorf("%s: a short body was cut: %q", name, excerpt)
		}
	}
}

// TestRefusalRecordStaysWithinItsShare: a day's record of refusals never
// passes its share of the quota, not even by the summary that fills it.
func TestRefusalRecordStaysWithinItsShare(t *testing.T) {
	dir := t.TempDir()
	const quota = 1 << 20
	a, err := OpenAuditLog(dir, WithLimits(AuditLimits{MaxBytes: quota}), WithClock((&clock{t: testNow}).now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	written := 0
	for i := 0; ; i++ {
		r := Refusal{At: testNow, Transport: "libp2p", Code: "invalid_format", Reason: "bad frame"}
		SummariseRefusal(&r, nil, []byte(strings.Repeat("z", 3000)))
		if err := a.RecordRefusal(r); err != nil {
			break
		}
		written++
		if i > 10000 {
			t.Fatal("the record of refusals never filled")
		}
	}
	if got := dirBytes(t, filepath.Join(dir, testNow.Format(auditDayLayout))); got > quota/RefusalShare {
		t.Fatalf("after %d summaries the record of refusals takes %d bytes, over its share of %d", written, got, quota/RefusalShare)
	}
	if written == 0 {
		t.Fatal("no summary was written")
	}
}
