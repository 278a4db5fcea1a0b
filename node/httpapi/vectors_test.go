package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ifaced/ifaced/node/wire"
)

// refusalVectors is what this test reads of node/wire's refusals.json
// (the package comment of node/wire describes the file).
type refusalVectors struct {
	Cases []struct {
		Name  string    `json:"name"`
		Stage string    `json:"stage"`
		JSON  string    `json:"json"`
		Code  wire.Code `json:"code"`
	} `json:"cases"`
}

// TestInboxAnswersTheVectorsCodes: every JSON request body of the wire
// conformance vectors that must be refused while reading is refused by
// the HTTPS inbox and by a signed POST /invoke with the vector's code and
// that code's HTTP status (an "ifp": 3 message is unsupported_version, as
// the wire doc and the vector say, not invalid_format).
func TestInboxAnswersTheVectorsCodes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "wire", "testdata", "conformance", "refusals.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v refusalVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	d := start(t, testConfig())
	checked := 0
	for _, c := range v.Cases {
		if c.JSON == "" || c.Stage != "read" {
			continue
		}
		checked++
		for _, path := range []string{"/.well-known/iface/inbox", "/invoke"} {
			r := do(t, "POST", d.url+path, "application/json; charset=utf-8", []byte(c.JSON))
			if code := r.errorCode(t); code != string(c.Code) || r.status != wire.HTTPStatus(c.Code) {
				t.Errorf("%s through %s: %d %s, want %d %s: %s", c.Name, path, r.status, code, wire.HTTPStatus(c.Code), c.Code, r.body)
			}
		}
	}
	if checked < 2 {
		t.Fatalf("only %d JSON cases in the vectors", checked)
	}
}
