package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
)

// runCapsCommand is `caps`: the own document with no arguments, a peer's
// view with one, or a subcommand.
func runCapsCommand(ctx context.Context, e *env, args []string) error {
	if i := firstPositional(args); i >= 0 {
		rest := append(slices.Clone(args[:i]), args[i+1:]...)
		switch args[i] {
		case "validate":
			return runCapsValidate(ctx, e, rest)
		case "add":
			return runCapsAdd(ctx, e, rest)
		case "remove":
			return runCapsRemove(ctx, e, rest)
		}
	}
	f := newFlags(e, "caps", "[PEER] | add FILE | remove NAME | validate FILE", true)
	refresh := f.Bool("refresh", false, "ask the peer for its current view instead of showing the cached one")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	// A mistyped subcommand (`caps valdate FILE`) is said to be one,
	// unless the word is an alias.
	if len(pos) > 0 && !looksLikeID(pos[0]) {
		if s := suggest(pos[0], []string{"add", "remove", "validate"}); s != "" && !f.isAlias(pos[0]) {
			return usageError("caps %q: did you mean `caps %s`?", pos[0], s)
		}
	}
	switch {
	case len(pos) > 1:
		return usageError("caps takes at most one PEER, got %q", pos)
	case len(pos) == 0 && *refresh:
		return usageError("caps --refresh needs a PEER")
	}
	if len(pos) == 1 {
		ref, err := f.peerRef(ctx, nil, pos[0], false)
		if err != nil {
			return err
		}
		pos[0] = ref
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(pos) == 0 {
		doc, err := c.Document(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, doc)
		}
		printOwnDocument(e.stdout, doc)
		return nil
	}
	pc, err := c.PeerCapabilities(ctx, pos[0], *refresh)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, pc)
	}
	printPeerCaps(e.stdout, pc)
	return nil
}

// firstPositional is the index of the first argument of `caps` that is
// not a flag, so that `caps --home H add FILE` finds its subcommand; -1
// when there is none. --home is the only flag of caps that takes a value.
func firstPositional(args []string) int {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		case a == "-home" || a == "--home":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return i
		}
	}
	return -1
}

func printOwnDocument(w io.Writer, doc *negotiate.Document) {
	fmt.Fprintf(w, "seq %d, %d capabilities, updated %s\n", doc.Seq, len(doc.Capabilities), orDash(doc.Updated))
	width := len("NAME")
	for _, c := range doc.Capabilities {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  CONDITIONS\n", width, "NAME")
	for _, c := range doc.Capabilities {
		fmt.Fprintf(w, "%-*s  %s\n", width, c.Name, describeConditions(c))
	}
}

// describeConditions writes a capability's conditions as key=value pairs.
func describeConditions(c negotiate.Capability) string {
	var parts []string
	k := c.Conds()
	if k.MinDisclosure != "" {
		parts = append(parts, "min_disclosure="+k.MinDisclosure)
	}
	if k.MinAuthLevel != nil {
		parts = append(parts, "min_auth_level="+k.MinAuthLevel.String())
	}
	if k.Temperature != "" {
		parts = append(parts, "temperature="+k.Temperature)
	}
	if len(k.Persona) > 0 {
		parts = append(parts, "persona="+strings.Join(k.Persona, ","))
	}
	if len(k.Peers) > 0 {
		parts = append(parts, "peers="+strings.Join(k.Peers, ","))
	}
	if k.MaxConcurrent > 0 {
		parts = append(parts, fmt.Sprintf("max_concurrent=%d", k.MaxConcurrent))
	}
	if c.Hidden() {
		parts = append(parts, "(hidden from anyone not eligible)")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func printPeerCaps(w io.Writer, pc *api.PeerCaps) {
	who := pc.PeerID
	if pc.Display != "" {
		who = fmt.Sprintf("%s (%s)", pc.Display, pc.PeerID)
	}
	from := "cached, confirmed " + (time.Duration(pc.AgeSeconds) * time.Second).String() + " ago"
	if pc.Source == api.SourceQuery {
		from = "just asked"
	}
	fmt.Fprintf(w, "%s: seq %d, %s", who, pc.Seq, from)
	if pc.Stale {
		fmt.Fprint(w, " (stale: refresh with --refresh)")
	}
	fmt.Fprintln(w)
	if pc.GrantedToUs != nil {
		fmt.Fprintf(w, "granted to you: %s\n", describeGrant(*pc.GrantedToUs))
	}
	if pc.View == nil || len(pc.View.Capabilities) == 0 {
		fmt.Fprintln(w, "it shows you no capabilities")
		return
	}
	width := len("CAPABILITY")
	for _, c := range pc.View.Capabilities {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  ELIGIBLE\n", width, "CAPABILITY")
	for _, c := range pc.View.Capabilities {
		fmt.Fprintf(w, "%-*s  %s\n", width, c.Name, yesNo(isEligible(c)))
		for _, u := range c.Unmet {
			fmt.Fprintf(w, "    %s: required %s, have %s; %s\n", u.Condition, u.Required, u.Have, u.HowToMeet)
		}
	}
}

func runCapsAdd(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "caps add", "FILE", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("caps add takes one FILE holding one capability object (JSON or TOML)")
	}
	file := pos[0]
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// Decoded here first, so that a typo is reported with its line before
	// the daemon is involved.
	format := negotiate.FormatOf(file)
	var capability negotiate.Capability
	if err := negotiate.DecodeStrict(src, format, "", &capability); err != nil {
		return fileProblems(file, err)
	}
	body, err := json.Marshal(capability)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", file, err)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	doc, err := c.AddCapability(ctx, body)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Field != "" {
		// The daemon names the field; the file knows its line.
		loc := negotiate.Locate(&negotiate.FieldError{Field: ae.Field}, src, format, "")
		var fe *negotiate.FieldError
		if errors.As(loc, &fe) && fe.Line > 0 {
			return fmt.Errorf("%s:%d: %s", file, fe.Line, ae.Message)
		}
		return fmt.Errorf("%s: %s", file, ae.Message)
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, doc)
	}
	fmt.Fprintf(e.stdout, "added %s: the document is now seq %d with %d capabilities; peers in conversation are sent their new view\n",
		capability.Name, doc.Seq, len(doc.Capabilities))
	return nil
}

// fileProblems is the failure of a file with problems: each one a line,
// FILE:LINE: field: problem, printed on stderr before the summary (or
// listed in the JSON error).
func fileProblems(file string, err error) error {
	problems := negotiate.Errors(err)
	var lines []string
	for _, p := range problems {
		var fe *negotiate.FieldError
		switch {
		case errors.As(p, &fe) && fe.Line > 0:
			lines = append(lines, fmt.Sprintf("%s:%d: %s", file, fe.Line, fe.Describe()))
		case errors.As(p, &fe):
			lines = append(lines, fmt.Sprintf("%s: %s", file, fe.Describe()))
		default:
			lines = append(lines, fmt.Sprintf("%s: %v", file, p))
		}
	}
	return &problemsError{summary: fmt.Sprintf("%s: %d problem(s)", file, len(problems)), problems: lines}
}

func runCapsRemove(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "caps remove", "NAME", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("caps remove takes one capability NAME")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	doc, err := c.RemoveCapability(ctx, pos[0])
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, doc)
	}
	fmt.Fprintf(e.stdout, "removed %s: the document is now seq %d with %d capabilities; peers in conversation are sent their new view\n",
		pos[0], doc.Seq, len(doc.Capabilities))
	return nil
}
