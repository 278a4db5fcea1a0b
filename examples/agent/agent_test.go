package agent

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func call(t *testing.T, h http.Handler, body string) (int, answer) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body)))
	var a answer
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
	}
	return rec.Code, a
}

func TestExampleAgent(t *testing.T) {
	monday := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	h := Handler(func() time.Time { return monday })
	code, a := call(t, h, `{"invocation_id":"i","capability":"doc.summarize","params":{"text":"one two three four","max_words":2}}`)
	if code != 200 || a.Error != nil || a.Result.(map[string]any)["summary"] != "one two" {
		t.Fatalf("summarize: %d %+v", code, a)
	}
	_, a = call(t, h, `{"capability":"calendar.availability","params":{"days":7}}`)
	if w := a.Result.(map[string]any)["windows"].([]any); len(w) != 5 || w[0] != "2026-11-24T10:00:00Z/PT2H" {
		t.Fatalf("calendar: %+v", a)
	}
	_, a = call(t, h, `{"capability":"nope"}`)
	if a.Error == nil {
		t.Fatal("unknown capability answered without an error")
	}
	if code, _ := call(t, h, `not json`); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
}

// TestExampleAgentAnswersText: a message that names no capability (a
// plain-text A2A message, as ifaced forwards it) gets a text reply quoting
// what was said, bounded, and naming what the agent offers.
func TestExampleAgentAnswersText(t *testing.T) {
	h := Handler(nil)
	code, a := call(t, h, `{"invocation_id":"i","capability":"","message":{"body":{"text":"Hello, who are you?"}}}`)
	reply, _ := a.Result.(string)
	if code != 200 || a.Error != nil || !strings.Contains(reply, `You said: "Hello, who are you?"`) || !strings.Contains(reply, "doc.summarize") {
		t.Fatalf("text message: %d %+v", code, a)
	}
	if reply != Reply("Hello, who are you?") {
		t.Errorf("the webhook's reply %q is not Reply's", reply)
	}
	long := strings.Repeat("é", 1000)
	if r := Reply(long); len(r) > maxQuoted+300 || !utf8.ValidString(r) || !strings.Contains(r, "…") {
		t.Errorf("a long text's reply: %d bytes, valid %v: %q", len(r), utf8.ValidString(r), r)
	}
	// Without a message, an empty capability is still an unknown one.
	if _, a := call(t, h, `{"invocation_id":"i","capability":""}`); a.Error == nil {
		t.Error("an invocation with neither capability nor message was answered")
	}
}
