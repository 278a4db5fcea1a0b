package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/owner"
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
		if f.json {
			// The signed document as it is served, which caps add and
			// caps validate read back; GET /v1/document has the origins.
			doc, err := c.Document(ctx)
			if err != nil {
				return err
			}
			return writeJSON(e.stdout, doc)
		}
		own, err := c.OwnDocument(ctx)
		if err != nil {
			return err
		}
		printOwnDocument(e.stdout, own)
		return nil
	}
	pc, err := c.PeerCapabilities(ctx, pos[0], *refresh)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, pc)
	}
	printPeerCaps(e, pc)
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

// originWords say where a capability comes from, in the FROM column.
var originWords = map[string]string{
	owner.OriginConfig:  "config",
	owner.OriginRuntime: "caps add",
	owner.OriginMCP:     "mcp server",
	owner.OriginUnsaved: "unsaved",
}

// printOwnDocument lists the own capabilities with their conditions and
// where each comes from: config.toml, caps add (kept across restarts),
// the MCP server's tools.
func printOwnDocument(w io.Writer, own *api.OwnDocument) {
	doc := own.Document
	fmt.Fprintf(w, "seq %d, %d capabilities, updated %s\n", doc.Seq, len(doc.Capabilities), orDash(doc.Updated))
	origin := map[string]string{}
	for _, o := range own.Origins {
		origin[o.Name] = cmp.Or(originWords[o.Origin], o.Origin)
	}
	width, cwidth := len("NAME"), len("CONDITIONS")
	conds := make([]string, len(doc.Capabilities))
	for i, c := range doc.Capabilities {
		width = max(width, len(c.Name))
		conds[i] = describeConditions(c)
		cwidth = max(cwidth, len(conds[i]))
	}
	fmt.Fprintf(w, "%-*s  %-*s  FROM\n", width, "NAME", cwidth, "CONDITIONS")
	for i, c := range doc.Capabilities {
		fmt.Fprintf(w, "%-*s  %-*s  %s\n", width, c.Name, cwidth, conds[i], cmp.Or(origin[c.Name], "-"))
	}
	if len(own.Removed) > 0 {
		fmt.Fprintf(w, "removed with caps remove (config.toml has them; kept removed): %s\n", strings.Join(own.Removed, ", "))
	}
	for _, l := range own.LeftOut {
		fmt.Fprintf(w, "left out: %s, added with caps add, no longer valid: %s (caps remove %s forgets it)\n", l.Name, l.Problem, l.Name)
	}
}

// describeConditions writes a capability's conditions as key=value pairs.
func describeConditions(c negotiate.Capability) string {
	parts := c.ConditionTerms()
	if c.Hidden() {
		parts = append(parts, "(hidden from anyone not eligible)")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func printPeerCaps(e *env, pc *api.PeerCaps) {
	w := e.stdout
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
		// Everything below the name is the peer's own words: one line
		// each, printable, bounded.
		fmt.Fprintf(w, "%-*s  %s\n", width, termText(c.Name, 128), yesNo(isEligible(c)))
		if c.Description != "" {
			fmt.Fprintf(w, "    %s\n", termText(c.Description, maxTermDesc))
		}
		if p := describeParams(c.Parameters); p != "" {
			fmt.Fprintf(w, "    params: %s\n", p)
		}
		if c.Price != nil {
			fmt.Fprintf(w, "    price: %s %s\n", termText(c.Price.Amount, 64), termText(c.Price.Currency, 64))
		}
		for _, u := range c.Unmet {
			fmt.Fprintf(w, "    %s: required %s, have %s; %s\n", termText(string(u.Condition), 64), termText(u.Required, 64), termText(u.Have, 64), termText(u.HowToMeet, maxTermLine))
		}
	}
	fmt.Fprint(w, e.hint(fmt.Sprintf("(`ifaced invoke %s NAME --params JSON` runs one; --json shows the whole schemas)\n", pc.PeerID)))
}

// maxParams is how many parameters describeParams names.
const maxParams = 12

// describeParams sums a JSON Schema of parameters up on one line: each
// property with its type, required ones marked, as `days (integer,
// required), text (string)`; "none" for an object without properties, ""
// when there is no schema.
func describeParams(schema any) string {
	m, ok := schema.(map[string]any)
	if !ok {
		return ""
	}
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return "none"
	}
	required := map[string]bool{}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if len(parts) == maxParams {
			parts = append(parts, fmt.Sprintf("… (%d in all)", len(props)))
			break
		}
		kind := "any"
		if p, ok := props[name].(map[string]any); ok {
			switch t := p["type"].(type) {
			case string:
				kind = t
			case []any:
				var ts []string
				for _, x := range t {
					if s, ok := x.(string); ok {
						ts = append(ts, s)
					}
				}
				kind = strings.Join(ts, "|")
			}
		}
		d := termText(name, 64) + " (" + termText(kind, 64)
		if required[name] {
			d += ", required"
		}
		parts = append(parts, d+")")
	}
	return strings.Join(parts, ", ")
}

// capabilityFile is a file `caps validate` and `caps add` read: a
// config.toml (its capabilities, the config checked whole), or one
// capability, a list, a document or [[capabilities]] tables
// (negotiate.LoadCapabilities), in JSON or TOML by its extension.
type capabilityFile struct {
	name   string
	src    []byte
	format negotiate.Format
	config bool                      // a config.toml (it has a top-level version)
	read   *negotiate.CapabilityFile // what negotiate read, shape known; nil for a config or a file not read that far
	caps   []negotiate.Capability
}

// loadCapabilityFile reads name; err holds its problems. With validate,
// what it read is validated under the home config's tier order when one
// loads; without, only read (strictly, every misspelling named): caps add
// leaves validation to the daemon, whose tiers are the ones in force.
func loadCapabilityFile(f *flags, e *env, name string, validate bool) (*capabilityFile, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	cf := &capabilityFile{name: name, src: src, format: negotiate.FormatOf(name)}
	if cf.format == negotiate.FormatTOML && isConfig(src) {
		cf.config = true
		cfg, err := config.ParseConfig(src)
		if err != nil {
			return cf, err
		}
		doc, err := cfg.Document("did:key:(this daemon)")
		if err != nil {
			return cf, err
		}
		cf.caps = doc.Capabilities
		return cf, nil
	}
	if !validate {
		cf.read, err = negotiate.DecodeCapabilities(src, cf.format)
		if err != nil {
			return cf, err
		}
		cf.caps = cf.read.Capabilities
		return cf, nil
	}
	var order *conditions.TierOrder
	if h, herr := f.homeDir(e); herr == nil {
		if cfg, cerr := config.LoadConfig(h.ConfigPath()); cerr == nil {
			order, _ = cfg.TierOrder()
		}
	}
	cf.read, err = negotiate.LoadCapabilities(src, cf.format, order)
	if err != nil {
		return cf, err
	}
	cf.caps = cf.read.Capabilities
	return cf, nil
}

// kind is the file's kind for `caps validate --json`.
func (cf *capabilityFile) kind() string {
	switch {
	case cf.config:
		return "config"
	case cf.read == nil:
		return ""
	}
	return map[negotiate.Shape]string{negotiate.ShapeCapability: "capability", negotiate.ShapeList: "list",
		negotiate.ShapeDocument: "document", negotiate.ShapeTables: "tables"}[cf.read.Shape]
}

// describe says what was read: "one capability (JSON)", "a config.toml
// with 6 capabilities (TOML)"; "" when the file was not read that far.
func (cf *capabilityFile) describe() string {
	switch {
	case cf.config:
		return fmt.Sprintf("a config.toml with %d capabilities (TOML)", len(cf.caps))
	case cf.read == nil:
		return ""
	}
	return cf.read.Describe()
}

// capsReport is what `caps validate --json` prints.
type capsReport struct {
	File         string          `json:"file"`
	Kind         string          `json:"kind"` // "config", "capability", "list", "document" or "tables"; "" when not read that far
	Read         string          `json:"read,omitempty"`
	Valid        bool            `json:"valid"`
	Capabilities []string        `json:"capabilities,omitempty"`
	Errors       []reportedError `json:"errors,omitempty"`
}

type reportedError struct {
	Line       int    `json:"line,omitempty"`
	Field      string `json:"field"`
	Capability string `json:"capability,omitempty"`
	Problem    string `json:"problem"`
}

func runCapsValidate(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "caps validate", "FILE", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usageError("caps validate takes one FILE: one capability, a list of them, a capability document, [[capabilities]] tables or a config.toml, in JSON or TOML")
	}
	file := f.Arg(0)
	cf, err := loadCapabilityFile(f, e, file, true)
	if cf == nil {
		return err
	}
	rep := capsReport{File: file, Kind: cf.kind(), Read: cf.describe()}
	if err != nil {
		for _, p := range configProblems(err) {
			var fe *negotiate.FieldError
			if errors.As(p, &fe) {
				rep.Errors = append(rep.Errors, reportedError{fe.Line, fe.Field, fe.Capability, fe.Problem})
			} else {
				rep.Errors = append(rep.Errors, reportedError{Field: "(file)", Problem: p.Error()})
			}
		}
	} else {
		rep.Valid = true
		for _, c := range cf.caps {
			rep.Capabilities = append(rep.Capabilities, c.Name)
		}
	}
	switch {
	case f.json:
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	case rep.Valid && cf.config:
		fmt.Fprintf(e.stdout, "%s: valid config, %d capabilities: %s\n", file, len(rep.Capabilities), strings.Join(rep.Capabilities, ", "))
	case rep.Valid:
		fmt.Fprintf(e.stdout, "%s: valid, read as %s: %s\n", file, rep.Read, strings.Join(rep.Capabilities, ", "))
	default:
		if rep.Read != "" {
			fmt.Fprintf(e.stderr, "%s: read as %s\n", file, rep.Read)
		}
		for _, r := range rep.Errors {
			loc := file
			if r.Line > 0 {
				loc = fmt.Sprintf("%s:%d", file, r.Line)
			}
			fe := negotiate.FieldError{Field: r.Field, Capability: r.Capability, Problem: r.Problem}
			fmt.Fprintf(e.stderr, "%s: %s\n", loc, fe.Describe())
		}
	}
	if !rep.Valid {
		return &exitError{code: 1, err: fmt.Errorf("%s: %d problem(s)", file, len(rep.Errors))}
	}
	return nil
}

// isConfig tells a config.toml (which has a top-level version key) from a
// standalone capability file.
func isConfig(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			return false
		}
		if k, _, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "version" {
			return true
		}
	}
	return false
}

func runCapsAdd(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "caps add", "FILE", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("caps add takes one FILE: one capability, a list of them, a capability document or [[capabilities]] tables, in JSON or TOML")
	}
	file := pos[0]
	// Read here first, so that a typo is reported with its line before
	// the daemon is involved.
	cf, err := loadCapabilityFile(f, e, file, false)
	switch {
	case cf == nil:
		return err
	case cf.config:
		return usageError("%s is a config.toml (it has a top-level version): its capabilities are the daemon's at start. "+
			"To add capabilities at run time, give a file of their own: one capability, a list, a document, or [[capabilities]] tables", file)
	case err != nil:
		return fileProblems(file, err)
	case len(cf.caps) == 0:
		return fmt.Errorf("%s: read as %s: nothing to add", file, cf.describe())
	}
	body, err := json.Marshal(cf.caps)
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
		// The daemon names the field as "[i]…" of what was sent; the file
		// knows where capability i is, and its line.
		field := ae.Field
		if rest, ok := strings.CutPrefix(field, "["); ok {
			if num, after, ok := strings.Cut(rest, "]"); ok {
				if i, err := strconv.Atoi(num); err == nil {
					field = strings.TrimPrefix(cf.read.Path(i)+after, ".")
				}
			}
		}
		loc := negotiate.Locate(&negotiate.FieldError{Field: field}, cf.src, cf.format, "")
		var fe *negotiate.FieldError
		msg := strings.Replace(ae.Message, ae.Field, field, 1)
		if errors.As(loc, &fe) && fe.Line > 0 {
			return fmt.Errorf("%s:%d: %s", file, fe.Line, msg)
		}
		return fmt.Errorf("%s: %s", file, msg)
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, doc)
	}
	names := make([]string, len(cf.caps))
	for i, c := range cf.caps {
		names[i] = c.Name
	}
	fmt.Fprintf(e.stdout, "%s: read as %s\n", file, cf.describe())
	fmt.Fprintf(e.stdout, "added %s: the document is now seq %d with %d capabilities; peers in conversation are sent their new view; kept across restarts (caps remove undoes it)\n",
		strings.Join(names, ", "), doc.Seq, len(doc.Capabilities))
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
