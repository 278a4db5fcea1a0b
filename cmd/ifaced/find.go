package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
)

func runFind(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "find", "CAPABILITY", true)
	minVersion := f.String("min-version", "", "the lowest version wanted, dotted integers (e.g. 2 or 1.3); lower ones are listed as such")
	limit := f.Int("limit", node.DefaultFindLimit, fmt.Sprintf("the most providers to look up (1 to %d)", node.MaxFindLimit))
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
	if *minVersion != "" {
		if _, err := negotiate.ParseVersion(*minVersion); err != nil {
			return usageError("--min-version: %v", err)
		}
	}
	if *limit < 1 || *limit > node.MaxFindLimit {
		return usageError("--limit %d: want 1 to %d", *limit, node.MaxFindLimit)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	ans, err := c.Find(ctx, name, *minVersion, *limit)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, ans)
	}
	w := e.stdout
	if len(ans.Providers) == 0 {
		fmt.Fprintf(w, "no providers of %s found (a capability offered only to eligible peers is never advertised)\n", name)
		return nil
	}
	usable := 0
	for _, p := range ans.Providers {
		if p.Status == node.FindEligible {
			usable++
		}
	}
	noun := "providers"
	if len(ans.Providers) == 1 {
		noun = "provider"
	}
	fmt.Fprintf(w, "%s: %d %s, %d you may use now\n\n", name, len(ans.Providers), noun, usable)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDISPLAY\tVERSION\tSTATUS")
	for _, p := range ans.Providers {
		version := "-"
		if p.Capability != nil {
			version = p.Capability.VersionOrDefault()
		}
		who := p.PeerID
		if p.Status == node.FindImported {
			who = p.Source
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", who, orDash(p.Display), version, describeFound(p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range ans.Providers {
		if p.Status == node.FindIneligible {
			fmt.Fprintf(w, "\n(`ifaced caps PEER` shows how to meet each condition)\n")
			break
		}
	}
	return nil
}

// describeFound is a provider's status with its reasons, on one line.
func describeFound(p node.FindResult) string {
	switch p.Status {
	case node.FindEligible:
		return "eligible"
	case node.FindNotOffered:
		return "not offered to you"
	case node.FindUnreachable:
		return "unreachable: " + p.Error
	case node.FindImported:
		s := fmt.Sprintf("imported %s, ", p.Format)
		if p.Signed {
			s += "JWS verified, self-signed"
		} else {
			s += "unsigned"
		}
		if len(p.Why) > 0 {
			s += " (" + strings.Join(p.Why, "; ") + ")"
		}
		return s + "; conditions unknown"
	}
	s := strings.ReplaceAll(p.Status, "_", " ")
	if len(p.Why) > 0 {
		s += ": " + strings.Join(p.Why, "; ")
	}
	return s
}
