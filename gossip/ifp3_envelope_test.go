package gossip

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The hand-written envelope is judged against yaml.v3 itself: every
// expectation below is yaml.v3's output for the same envelope, computed
// here by writeEnvelopeYAML, never a string written into the test.

// greetingEnvelope is the envelope of a greeting as ifaced sends one.
func greetingEnvelope(t testing.TB) envelope {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	now := time.Date(2026, 3, 4, 23, 58, 12, 0, time.UTC)
	return envelope{
		IFP: 3, MessageID: NewID("msg", now), From: from.DID(), To: to.DID(), Date: FormatDate(now),
		Conversation: NewID("conv", now), Sequence: 1, Phase: string(PhaseGreeting),
		Disclosure: "professional", Persona: "default",
	}
}

// yamlEnvelope is the reference rendering of env.
func yamlEnvelope(t testing.TB, env *envelope) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeEnvelopeYAML(&b, env); err != nil {
		t.Fatalf("yaml.v3 does not encode %+v: %v", env, err)
	}
	return b.Bytes()
}

// checkEnvelope requires writeEnvelope to write yaml.v3's bytes for env,
// and so the hand-written path whenever it accepts env. It reports
// whether that path accepted env.
func checkEnvelope(t testing.TB, env *envelope) (fast bool) {
	t.Helper()
	want := yamlEnvelope(t, env)
	var got bytes.Buffer
	if err := writeEnvelope(&got, env); err != nil {
		t.Fatalf("writeEnvelope(%+v): %v", env, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("writeEnvelope differs from yaml.v3 for %+v:\n got %q\nwant %q", env, got.Bytes(), want)
	}
	var hand bytes.Buffer
	fast = writeEnvelopeFast(&hand, env)
	if fast && !bytes.Equal(hand.Bytes(), want) {
		t.Fatalf("hand-written envelope differs from yaml.v3 for %+v:\n got %q\nwant %q", env, hand.Bytes(), want)
	}
	if !fast && hand.Len() != 0 {
		t.Fatalf("refused envelope left %q behind", hand.Bytes())
	}
	return fast
}

// TestEnvelopeTypical: the envelopes ifaced sends and receives take the
// hand-written path, and it writes what yaml.v3 writes.
func TestEnvelopeTypical(t *testing.T) {
	base := greetingEnvelope(t)
	cases := map[string]func(e *envelope){
		"greeting":           func(e *envelope) {},
		"no disclosure":      func(e *envelope) { e.Disclosure, e.Persona = "", "" },
		"reply-to":           func(e *envelope) { e.ReplyTo, e.Sequence = 1, 2 },
		"negative numbers":   func(e *envelope) { e.ReplyTo, e.Sequence = -3, -1<<63 },
		"largest sequence":   func(e *envelope) { e.Sequence = MaxSafeInteger },
		"sequence zero":      func(e *envelope) { e.Sequence = 0 },
		"subject update":     func(e *envelope) { e.Subject = "capability update" },
		"subject apostrophe": func(e *envelope) { e.Subject = "What's current" },
		"subject long":       func(e *envelope) { e.Subject = strings.Repeat("word and another ", 30) + "end" },
		"id long":            func(e *envelope) { e.MessageID = "msg:" + strings.Repeat("0123456789ABCDEFGHJK", 12) },
		"no recipient":       func(e *envelope) { e.To = "" },
		"all empty":          func(e *envelope) { *e = envelope{} },
		"date fraction":      func(e *envelope) { e.Date = "2026-03-04T23:58:12.123456789Z" },
		"date short frac":    func(e *envelope) { e.Date = "2026-03-04T23:58:12.5Z" },
		"date offset":        func(e *envelope) { e.Date = "2026-03-04T23:58:12+02:00" },
		"date neg offset":    func(e *envelope) { e.Date = "2026-03-04T23:58:12.25-05:30" },
		"date leap day":      func(e *envelope) { e.Date = "2028-02-29T00:00:00Z" },
		"tier open":          func(e *envelope) { e.Disclosure = "professional-open" },
		"tier community":     func(e *envelope) { e.Disclosure = "community-trust" },
		"persona plain":      func(e *envelope) { e.Persona = "researcher" },
		"agent name":         func(e *envelope) { e.From = "github:alice.freya" },
		"agent url":          func(e *envelope) { e.From = "https://agents.example/alice" },
		"agent did:web":      func(e *envelope) { e.To = "did:web:agents.example:alice" },
		"agent mail":         func(e *envelope) { e.To = "alice+agent@agents.example" },
		"words inside":       func(e *envelope) { e.Subject = "yes or no on off" },
		"word prefixes":      func(e *envelope) { e.Persona, e.Disclosure = "nobody", "yesterday" },
		"letters then nums":  func(e *envelope) { e.Persona = "e5" },
	}
	for _, phase := range []Phase{PhaseGreeting, PhaseContext, PhaseProbe, PhaseRecommend, PhaseClose, PhaseError} {
		cases["phase "+string(phase)] = func(e *envelope) { e.Phase = string(phase) }
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			env := base
			change(&env)
			if !checkEnvelope(t, &env) {
				t.Fatalf("the hand-written path refused %+v", env)
			}
		})
	}
}

// TestEnvelopeEveryField sets every field of envelope, found by
// reflection, so that a field added to the struct and not to
// writeEnvelopeFast fails here rather than vanishing from renderings.
func TestEnvelopeEveryField(t *testing.T) {
	var env envelope
	v := reflect.ValueOf(&env).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.String:
			f.SetString("value-of-" + name)
		case f.CanInt():
			f.SetInt(int64(i + 1))
		case name == "Languages":
			// Nested: always yaml.v3's (TestEnvelopeLanguages).
		default:
			t.Fatalf("envelope.%s is a %s: writeEnvelopeFast and this test do not know it", name, f.Type())
		}
	}
	if !checkEnvelope(t, &env) {
		t.Fatalf("the hand-written path refused %+v", env)
	}
}

// awkwardStrings are values whose YAML form is not plain, or that come
// near a rule of envelopePlain or envelopeTimestamp.
var awkwardStrings = []string{
	"", " ", "  ", "yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "NO", "Off", "true", "True", "TRUE",
	"tRUE", "false", "FALSE", "null", "Null", "NULL", "nULL", "~", "<<", "1e5", "1E5", "0x1F", "0o17", "0b101",
	"0777", "1_000", "1.5", "1.", ".5", "+1", "-1", "12e3", ".inf", "-.inf", "+.inf", ".nan", ".NaN",
	"12:30", "1:20:30.5", "190:20:30", "2026-01-01", "2026-1-1", "2026-03-04 23:58:12",
	"2026-03-04t23:58:12z", "2026-03-04T23:58:12z", "2026-03-04T23:58:12", "2026-13-04T23:58:12Z",
	"2026-02-30T00:00:00Z", "2026-03-04T24:00:00Z", "2026-03-04T23:60:00Z", "2026-03-04T23:58:60Z",
	"2026-03-04T23:58:12+25:00", "2026-03-04T23:58:12+02:99", "2026-03-04T23:58:12.Z",
	"2026-03-04T23:58:12.1234567890Z", "2026-03-04T23:58:12+0200", "02026-03-04T23:58:12Z",
	" lead", "trail ", "a  b", "- x", "-x", "-", "--", "---", "--- x", "...", "#x", "a #b", "a#b",
	"a: b", "a:", "a:b", "a::b", ": a", ":x", "? x", "?x", "key: value", "a - b", "@x", "`x", "!x",
	"&x", "*x", "%x", "|x", ">x", "'x", "x'", "\"x\"", "What's \"quoted\"", "[x]", "{x}", "a,b", "a[b]",
	"a{b}", "a\\b", "a=b", "a|b", "a>b", "a!b", "a%b", "unicode é", "é", "emoji 🙂", "日本語",
	"new\nline", "trailing\n", "\nleading", "tab\there", "\t", "cr\rhere", "nul\x00here", "bell\x07",
	"del\x7f", "\xff", "a\xc3", "\ufeffbom", "line\u2028sep", "next\u0085line", "nbsp\u00a0here",
	"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp#z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp",
	strings.Repeat("x", 1000), strings.Repeat("ab ", 100) + "c",
}

// TestEnvelopeAwkward puts every awkward value in every string field: the
// output is yaml.v3's, whichever path wrote it.
func TestEnvelopeAwkward(t *testing.T) {
	base := greetingEnvelope(t)
	fields := map[string]func(e *envelope) *string{
		"message-id":   func(e *envelope) *string { return &e.MessageID },
		"from":         func(e *envelope) *string { return &e.From },
		"to":           func(e *envelope) *string { return &e.To },
		"date":         func(e *envelope) *string { return &e.Date },
		"conversation": func(e *envelope) *string { return &e.Conversation },
		"phase":        func(e *envelope) *string { return &e.Phase },
		"subject":      func(e *envelope) *string { return &e.Subject },
		"disclosure":   func(e *envelope) *string { return &e.Disclosure },
		"persona":      func(e *envelope) *string { return &e.Persona },
	}
	for name, field := range fields {
		t.Run(name, func(t *testing.T) {
			fast := 0
			for _, v := range awkwardStrings {
				env := base
				*field(&env) = v
				if checkEnvelope(t, &env) {
					fast++
				}
			}
			// Some of them (the empty string, "a:b", "a - b") are the
			// hand-written path's to write; the comparison checked them.
			if fast == 0 {
				t.Fatal("the hand-written path took none of the awkward values")
			}
		})
	}
}

// TestEnvelopeRefuses: values that yaml.v3 writes other than plain, or
// whose plain form would read back as another type, are never written
// plain by the hand-written path: it refuses them (quoting only the empty
// string and RFC 3339 dates itself).
func TestEnvelopeRefuses(t *testing.T) {
	for _, v := range awkwardStrings {
		if v == "" || envelopeTimestamp(v) {
			continue
		}
		if envelopePlain(v) {
			env := greetingEnvelope(t)
			env.Subject = v
			if !bytes.Contains(yamlEnvelope(t, &env), []byte("\nsubject: "+v+"\n")) {
				t.Errorf("%q is taken as plain, yaml.v3 does not write it so", v)
			}
		}
	}
	for _, v := range []string{"yes", "No", "ON", "off", "y", "N", "true", "False", "null", "~", "1e5", "0x1F",
		"12:30", "2026-01-01", " lead", "trail ", "- x", "#x", "a #b", "a: b", "a:", "new\nline", "é", "a\tb", "'x"} {
		if envelopePlain(v) {
			t.Errorf("envelopePlain(%q) = true", v)
		}
	}
	// A date-shaped value that is no date is plain to yaml.v3, and not
	// this path's to decide.
	for _, v := range []string{"2026-13-04T23:58:12Z", "2026-02-30T00:00:00Z", "2026-03-04T23:58:12z", "2026-03-04"} {
		if envelopeTimestamp(v) {
			t.Errorf("envelopeTimestamp(%q) = true", v)
		}
	}
}

// TestEnvelopeLanguages: languages (nested, not sent by ifaced) go to
// yaml.v3 whole, and a refused envelope leaves what the buffer held.
func TestEnvelopeLanguages(t *testing.T) {
	for _, l := range []*Languages{
		{}, {Content: "en"}, {Preferred: []string{"en", "es"}}, {Human: []string{"no", "yes"}},
		{Content: "en", Preferred: []string{"en", ""}, Human: []string{"de"}}, {Preferred: []string{}},
	} {
		env := greetingEnvelope(t)
		env.Languages = l
		if checkEnvelope(t, &env) {
			t.Fatalf("languages %+v took the hand-written path", l)
		}
	}
	env := greetingEnvelope(t)
	env.Subject = "a: b"
	out := bytes.NewBufferString(frontMatterDelim)
	if writeEnvelopeFast(out, &env) {
		t.Fatal("subject \"a: b\" took the hand-written path")
	}
	if out.String() != frontMatterDelim {
		t.Fatalf("a refused envelope changed the buffer to %q", out.String())
	}
}

// TestRenderIFP3Envelope: a rendering is the one yaml.v3 made before the
// hand-written envelope, for a greeting (hand-written path) and for the
// sample message (languages: yaml.v3's path).
func TestRenderIFP3Envelope(t *testing.T) {
	for name, m := range map[string]*Message{"greeting": benchGreeting(t), "sample": sampleMessage(testIdentity(t, 1), testIdentity(t, 2))} {
		var got, want bytes.Buffer
		if err := renderIFP3(&got, m, func(string) (int64, bool) { return 1, true }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := renderIFP3With(&want, m, func(string) (int64, bool) { return 1, true }, writeEnvelopeYAML); err != nil {
			t.Fatalf("%s through yaml.v3: %v", name, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s: rendering differs from yaml.v3's:\n got %s\nwant %s", name, got.Bytes(), want.Bytes())
		}
	}
	env := greetingEnvelope(t)
	if !checkEnvelope(t, &env) {
		t.Fatal("a greeting's envelope does not take the hand-written path")
	}
}

// FuzzIFP3Envelope: for any field values, writeEnvelope writes what
// yaml.v3 writes, and the hand-written path, when it accepts them, too.
func FuzzIFP3Envelope(f *testing.F) {
	env := greetingEnvelope(f)
	f.Add(env.MessageID, env.From, env.To, env.Date, env.Conversation, int64(1), env.Phase, "", env.Disclosure, int64(0), env.Persona, false)
	f.Add("msg:x", "did:key:z", "", "2026-03-04T23:58:12.5+01:00", "conv:y", int64(-2), "close", "What's current", "", int64(7), "", false)
	f.Add("yes", "a: b", "#x", "2026-13-04T23:58:12Z", "12:30", int64(0), "", "new\nline", "é", int64(1), "- x", true)
	for i, v := range awkwardStrings {
		f.Add("msg:"+v, v, "did:key:z", v, "conv:c", int64(i), "context", v, "public", int64(0), v, i%7 == 0)
	}
	f.Fuzz(func(t *testing.T, id, from, to, date, conv string, seq int64, phase, subject, disclosure string, replyTo int64, persona string, languages bool) {
		env := envelope{IFP: 3, MessageID: id, From: from, To: to, Date: date, Conversation: conv, Sequence: seq,
			Phase: phase, Subject: subject, Disclosure: disclosure, ReplyTo: replyTo, Persona: persona}
		if languages {
			env.Languages = &Languages{Content: persona, Preferred: []string{subject}}
		}
		checkEnvelope(t, &env)
	})
}
