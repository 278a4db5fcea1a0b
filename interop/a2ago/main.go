// Command a2ago checks an ifaced daemon's A2A agent card with the real
// a2a-go client: it resolves the card from {base}/.well-known/agent-card.json
// with a2a-go's agentcard.Resolver, then builds an a2aclient.Client from it
// (which picks a transport from the card's url and preferredTransport; no
// request is sent to the A2A endpoint). It prints a one-line JSON summary,
// or says what failed and exits 1.
//
// It is a module of its own so that ifaced's dependency graph does not
// carry a2a-go and gRPC; node/httpapi's TestRealClientsAcceptTheEndpoints
// runs it with `go run . BASE_URL`.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . BASE_URL   (the daemon's public HTTP binding, e.g. http://127.0.0.1:8787)")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "a2a-go:", err)
		os.Exit(1)
	}
}

// summary is what the check prints on success.
type summary struct {
	Client             string   `json:"client"`
	Name               string   `json:"name"`
	URL                string   `json:"url"`
	ProtocolVersion    string   `json:"protocolVersion"`
	PreferredTransport string   `json:"preferredTransport"`
	Skills             []string `json:"skills"`
	Signatures         int      `json:"signatures"`
}

func check(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	card, err := agentcard.NewResolver(&http.Client{Timeout: 30 * time.Second}).Resolve(ctx, base)
	if err != nil {
		return fmt.Errorf("resolving the agent card from %s: %w", base, err)
	}
	if err := required(card); err != nil {
		return fmt.Errorf("the resolved agent card: %w", err)
	}

	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		return fmt.Errorf("building a client from the agent card (url %q, preferredTransport %q): %w", card.URL, card.PreferredTransport, err)
	}
	defer client.Destroy()

	s := summary{
		Client:             "a2a-go v0.3.6",
		Name:               card.Name,
		URL:                card.URL,
		ProtocolVersion:    card.ProtocolVersion,
		PreferredTransport: string(card.PreferredTransport),
		Skills:             []string{},
		Signatures:         len(card.Signatures),
	}
	for _, sk := range card.Skills {
		s.Skills = append(s.Skills, sk.ID)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// required checks the members the A2A 0.3 schema requires and a2a-go's
// lenient json.Unmarshal would leave empty without complaint.
func required(c *a2a.AgentCard) error {
	for _, m := range []struct{ name, value string }{
		{"name", c.Name}, {"description", c.Description}, {"version", c.Version},
		{"url", c.URL}, {"protocolVersion", c.ProtocolVersion},
	} {
		if m.value == "" {
			return fmt.Errorf("%s is missing or empty", m.name)
		}
	}
	if c.Skills == nil {
		return fmt.Errorf("skills is missing")
	}
	if len(c.DefaultInputModes) == 0 || len(c.DefaultOutputModes) == 0 {
		return fmt.Errorf("defaultInputModes or defaultOutputModes is missing or empty")
	}
	for i, sk := range c.Skills {
		if sk.ID == "" || sk.Name == "" || sk.Description == "" || len(sk.Tags) == 0 {
			return fmt.Errorf("skills[%d] (%q) lacks id, name, description or tags", i, sk.ID)
		}
	}
	return nil
}
