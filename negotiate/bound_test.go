package negotiate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
)

// TestDecodeViewBound: a view made of tiny containers (as a GossipSub
// announcement or the peer cache may hold one) is refused before it is
// decoded, naming the bound; the largest view a document may give is not.
func TestDecodeViewBound(t *testing.T) {
	maps := strings.Repeat(`{},`, 20000)
	bomb := []byte(`{"ifp":7,"agent_id":"a","capabilities":[],"x":[` + maps + `{}]}`)
	_, err := DecodeViewJSON(bomb)
	if !errors.Is(err, ErrNotAView) || !errors.Is(err, gossip.ErrOverBound) || !strings.Contains(err.Error(), "16384 containers") {
		t.Fatalf("a view of 20,000 maps: %v, want ErrNotAView and ErrOverBound naming the container bound", err)
	}
	if _, err := DecodeView(json.RawMessage(bomb)); !errors.Is(err, gossip.ErrOverBound) {
		t.Fatalf("DecodeView of the same: %v, want ErrOverBound", err)
	}

	caps := make([]string, MaxCapabilities)
	for i := range caps {
		caps[i] = fmt.Sprintf(`{"name":"tool%03d.run","description":"Does something useful.","eligible":true,`+
			`"parameters":{"type":"object","required":["text"],"properties":{"text":{"type":"string"},"n":{"type":"integer","minimum":1},`+
			`"language":{"type":"string","enum":["en","es","de","fr"]}}},"output_schema":{"type":"object","properties":{"r":{"type":"string"}}},`+
			`"conditions":{"min_auth_level":1},"price":{"amount":"0.05","currency":"USDC"},"categories":["web"]}`, i)
	}
	largest := []byte(`{"ifp":7,"agent_id":"a","capabilities":[` + strings.Join(caps, ",") + `]}`)
	if _, err := DecodeViewJSON(largest); err != nil {
		t.Fatalf("a view of %d rich capabilities: %v", MaxCapabilities, err)
	}
}

// TestReadGreetingBound: a greeting part of thousands of containers is
// refused as an unreadable greeting naming the part and the bound.
func TestReadGreetingBound(t *testing.T) {
	var many []any
	for range 300 {
		many = append(many, map[string]any{})
	}
	m := &gossip.Message{Body: gossip.Body{Parts: []gossip.Part{{Name: PartGreeting, Content: map[string]any{"temperature": "warm", "x": many}}}}}
	_, err := ReadGreeting(m)
	if !errors.Is(err, ErrInvalidGreeting) || !strings.Contains(err.Error(), "body.parts[0].content") || !strings.Contains(err.Error(), "at most 256") {
		t.Fatalf("a greeting part of 300 maps: %v, want ErrInvalidGreeting naming the part and the bound", err)
	}
	m.Body.Parts[0].Content = map[string]any{"temperature": "warm", "x": many[:10]}
	if g, err := ReadGreeting(m); err != nil || g.Temperature != "warm" {
		t.Fatalf("a greeting part within the bound: %+v, %v", g, err)
	}
}
