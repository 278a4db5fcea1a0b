package agent

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
