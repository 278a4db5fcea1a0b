package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/discovery"
)

// `ifaced find` asks the daemon to search the DHT (GET /v1/find), which
// also lists the imported agents that offer the capability, and then
// looks at the peers the daemon already knows: each cached view that
// lists the capability is a provider too, judged as that view judged this
// daemon (as the MCP tool find_agents does). When the DHT cannot be
// searched, the answer says why, and still lists imports and known peers.

// maxKnownLooked bounds the cached peers find looks at.
const maxKnownLooked = 256

// findOutput is what `find --json` prints: the daemon's answer, and the
// known peers whose cached view lists the capability.
type findOutput struct {
	api.FindAnswer
	Known []knownProvider `json:"known"`
}

// knownProvider is a provider from the peer cache: its view as cached,
// AgeSeconds old.
type knownProvider struct {
	discovery.FindResult
	AgeSeconds int64 `json:"age_seconds"`
}

func runFind(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "find", "CAPABILITY", true)
	minVersion := f.String("min-version", "", "the lowest version wanted, dotted integers (e.g. 2 or 1.3); lower ones are listed as such")
	limit := f.Int("limit", discovery.DefaultFindLimit, fmt.Sprintf("the most providers to look up (1 to %d)", discovery.MaxFindLimit))
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("find takes one CAPABILITY (e.g. calendar.availability)")
	}
	name := pos[0]
	// Checked here too, so a typo is a usage error before any daemon is asked.
	if err := negotiate.CheckName(name); err != nil {
		return usageError("%v", err)
	}
	var atLeast []int
	if *minVersion != "" {
		if atLeast, err = negotiate.ParseVersion(*minVersion); err != nil {
			return usageError("--min-version: %v", err)
		}
	}
	if *limit < 1 || *limit > discovery.MaxFindLimit {
		return usageError("--limit %d: want 1 to %d", *limit, discovery.MaxFindLimit)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	ans, findErr := c.Find(ctx, name, *minVersion, *limit)
	var ae *api.Error
	switch {
	case errors.As(findErr, &ae) && ae.Code == api.CodeDHTUnavailable:
		ans = &api.FindAnswer{Capability: name, MinVersion: *minVersion, Providers: []discovery.FindResult{}, DHT: ae.Message}
	case findErr != nil:
		return findErr
	}
	out := findOutput{FindAnswer: *ans, Known: []knownProvider{}}
	seen := map[string]bool{}
	for _, p := range ans.Providers {
		seen[p.PeerID] = true
	}
	if out.Known, err = knownProviders(ctx, c, name, atLeast, seen); err != nil {
		return err
	}
	if findErr != nil && len(out.Known) == 0 {
		return findErr // the DHT could not be searched, and nothing else offers it
	}
	if f.json {
		return writeJSON(e.stdout, out)
	}
	return printFound(e, name, out)
}

// knownProviders are the peers the daemon knows whose cached view lists
// capability and that are not in seen.
func knownProviders(ctx context.Context, c *api.Client, capability string, atLeast []int, seen map[string]bool) ([]knownProvider, error) {
	peers, err := c.Peers(ctx)
	if err != nil {
		return nil, err
	}
	out := []knownProvider{}
	looked := 0
	for _, pr := range peers {
		if !pr.Cached || seen[pr.PeerID] {
			continue
		}
		if looked++; looked > maxKnownLooked {
			break
		}
		pc, err := c.PeerCapabilities(ctx, pr.PeerID, false)
		if err != nil || pc.View == nil {
			continue
		}
		cp, ok := pc.View.Capability(capability)
		if !ok {
			continue
		}
		r := knownProvider{FindResult: discovery.FindResult{PeerID: pc.PeerID, AgentID: pc.AgentID, Display: pc.Display, Capability: cp,
			GrantedToUs: pc.GrantedToUs, Status: discovery.FindEligible}, AgeSeconds: pc.AgeSeconds}
		switch {
		case atLeast != nil && !negotiate.VersionAtLeast(cp.VersionOrDefault(), atLeast):
			r.Status, r.Why = discovery.FindBelowMinVersion, []string{fmt.Sprintf("offers version %s, below %s", cp.VersionOrDefault(), negotiate.FormatVersion(atLeast))}
		case cp.Eligible == nil || !*cp.Eligible:
			r.Status = discovery.FindIneligible
			for _, u := range cp.Unmet {
				r.Why = append(r.Why, fmt.Sprintf("needs %s %s, you have %s", u.Condition, u.Required, u.Have))
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func printFound(e *env, name string, out findOutput) error {
	w := e.stdout
	all := len(out.Providers) + len(out.Known)
	if all == 0 {
		fmt.Fprintf(w, "no providers of %s found (a capability offered only to eligible peers is never advertised)\n", name)
		if out.DHT != "" {
			fmt.Fprintf(w, "the DHT was not searched: %s\n", out.DHT)
		}
		return nil
	}
	usable, ineligible := 0, false
	for _, p := range out.Providers {
		usable += btoi(p.Status == discovery.FindEligible)
		ineligible = ineligible || p.Status == discovery.FindIneligible
	}
	for _, p := range out.Known {
		usable += btoi(p.Status == discovery.FindEligible)
		ineligible = ineligible || p.Status == discovery.FindIneligible
	}
	noun := "providers"
	if all == 1 {
		noun = "provider"
	}
	fmt.Fprintf(w, "%s: %d %s, %d you may use now\n\n", name, all, noun, usable)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDISPLAY\tVERSION\tSTATUS")
	row := func(p discovery.FindResult, status string) {
		version := "-"
		if p.Capability != nil {
			version = termText(p.Capability.VersionOrDefault(), 32)
		}
		who := p.PeerID
		if p.Status == discovery.FindImported {
			who = p.Source
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", who, orDash(termText(p.Display, 64)), version, status)
	}
	for _, p := range out.Providers {
		row(p, describeFound(p))
	}
	for _, p := range out.Known {
		row(p.FindResult, describeFound(p.FindResult)+fmt.Sprintf(" (known peer: its view of %s ago)", time.Duration(p.AgeSeconds)*time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.DHT != "" {
		fmt.Fprintf(w, "\nthe DHT was not searched: %s\n", out.DHT)
	}
	if ineligible {
		fmt.Fprint(w, e.hint("\n(`ifaced caps PEER` shows how to meet each condition)\n"))
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describeFound is a provider's status with its reasons, on one line.
func describeFound(p discovery.FindResult) string {
	switch p.Status {
	case discovery.FindEligible:
		return "eligible"
	case discovery.FindNotOffered:
		return "not offered to you"
	case discovery.FindUnreachable:
		return "unreachable: " + termText(p.Error, maxTermLine)
	case discovery.FindImported:
		s := fmt.Sprintf("imported %s, ", p.Format)
		if p.Signed {
			s += "JWS verified, self-signed"
		} else {
			s += "unsigned"
		}
		if len(p.Why) > 0 {
			s += " (" + termText(strings.Join(p.Why, "; "), maxTermLine) + ")"
		}
		return s + "; conditions unknown"
	}
	s := strings.ReplaceAll(p.Status, "_", " ")
	if len(p.Why) > 0 {
		s += ": " + termText(strings.Join(p.Why, "; "), maxTermLine)
	}
	return s
}
