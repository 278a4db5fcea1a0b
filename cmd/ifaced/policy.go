package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ifaced/ifaced/node/api"
)

// runPolicy shows or changes the disclosure map and temperature caps:
//
//	ifaced policy
//	ifaced policy disclosure PEER TIER [--persona P]   (TIER "-" removes the run-time grant)
//	ifaced policy temperature PEER MAX                 (MAX "-" removes the run-time cap)
func runPolicy(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "policy", "[disclosure PEER TIER | temperature PEER MAX]", true)
	persona := f.String("persona", "", "the persona the tier applies under (default: the owner's default context)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	dash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	var change func(c *api.Client) (*api.Policy, error)
	switch {
	case len(pos) == 0:
		change = func(c *api.Client) (*api.Policy, error) { return c.Policy(ctx) }
	case pos[0] == "disclosure" && len(pos) == 3:
		change = func(c *api.Client) (*api.Policy, error) {
			return c.SetDisclosure(ctx, api.DisclosureChange{Persona: *persona, Peer: pos[1], Tier: dash(pos[2])})
		}
	case pos[0] == "temperature" && len(pos) == 3:
		change = func(c *api.Client) (*api.Policy, error) {
			return c.SetTemperature(ctx, api.TemperatureChange{Peer: pos[1], Max: dash(pos[2])})
		}
	default:
		return usageError("policy takes nothing, `disclosure PEER TIER` or `temperature PEER MAX`")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(pos) == 3 {
		// A grant: aliases and peer IDs only (see peerRef).
		if pos[1], err = f.peerRef(ctx, c, pos[1], true); err != nil {
			return err
		}
	}
	p, err := change(c)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, p)
	}
	printPolicy(e.stdout, p, f.peerLabels(ctx, c))
	return nil
}

// printPolicy writes the policy as a person reads it: the tiers in order,
// the defaults, then the grants and caps by peer (named by alias or
// display when known).
func printPolicy(out io.Writer, p *api.Policy, names peerLabeler) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "tiers\t%s\n", strings.Join(p.Tiers, " < "))
	fmt.Fprintf(w, "default tier\t%s\n", orDash(p.DefaultTier))
	fmt.Fprintf(w, "default max temperature\t%s\n", orDash(p.DefaultMaxTemperature))
	w.Flush()
	fmt.Fprintln(out)
	grants := 0
	for _, persona := range p.Disclosure {
		grants += len(persona)
	}
	if grants == 0 {
		fmt.Fprintf(out, "no peer is granted a tier of its own: every peer gets %s (`ifaced policy disclosure PEER TIER` grants one)\n", orDash(p.DefaultTier))
	} else {
		fmt.Fprintln(w, "PERSONA\tPEER\tTIER")
		for _, persona := range slices.Sorted(maps.Keys(p.Disclosure)) {
			for _, peer := range slices.Sorted(maps.Keys(p.Disclosure[persona])) {
				fmt.Fprintf(w, "%s\t%s\t%s\n", persona, names.label(peer), p.Disclosure[persona][peer])
			}
		}
		w.Flush()
	}
	fmt.Fprintln(out)
	if len(p.MaxTemperature) == 0 {
		fmt.Fprintf(out, "no peer has a temperature cap of its own: every peer is capped at %s (`ifaced policy temperature PEER MAX` sets one)\n", orDash(p.DefaultMaxTemperature))
		return
	}
	fmt.Fprintln(w, "PEER\tMAX TEMPERATURE")
	for _, peer := range slices.Sorted(maps.Keys(p.MaxTemperature)) {
		fmt.Fprintf(w, "%s\t%s\n", names.label(peer), p.MaxTemperature[peer])
	}
	w.Flush()
}
