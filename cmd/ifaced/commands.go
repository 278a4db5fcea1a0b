package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
)

func (f *flags) homeDir(e *env) (node.Home, error) {
	if f.home == "" {
		f.home = e.getenv(node.EnvHome)
	}
	return node.ResolveHome(f.home)
}

// idInfo is what `init` and `id` print.
type idInfo struct {
	PeerID      string `json:"peer_id"`
	DID         string `json:"did"`
	KeyID       string `json:"key_id"`
	Fingerprint string `json:"fingerprint"`
	Home        string `json:"home"`
}

func printID(w io.Writer, asJSON bool, id *identity.Identity, h node.Home) error {
	info := idInfo{id.PeerID().String(), id.DID(), id.KeyID(), id.Fingerprint(), h.Dir}
	if asJSON {
		return writeJSON(w, info)
	}
	fmt.Fprintf(w, "peer ID      %s\ndid          %s\nkey_id       %s\nfingerprint  %s\nhome         %s\n",
		info.PeerID, info.DID, info.KeyID, info.Fingerprint, info.Home)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runInit(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "init", "", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("init takes no arguments, got %q", f.Args())
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	id, err := h.Init(time.Now())
	if errors.Is(err, identity.ErrKeyExists) {
		return fmt.Errorf("%s already holds a key; this daemon's identity is never replaced (use another --home for a new one)", h.Dir)
	}
	if err != nil {
		return err
	}
	if !f.json {
		fmt.Fprintf(e.stdout, "created %s (key %s, config %s)\n\n", h.Dir, h.KeyPath(), h.ConfigPath())
	}
	return printID(e.stdout, f.json, id, h)
}

func runID(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "id", "", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("id takes no arguments, got %q", f.Args())
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return err
	}
	return printID(e.stdout, f.json, id, h)
}

// capsReport is what `caps validate --json` prints.
type capsReport struct {
	File         string          `json:"file"`
	Kind         string          `json:"kind"` // "config" or "document"
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
		return usageError("caps validate takes one FILE (a capability document in JSON or TOML, or a config.toml)")
	}
	file := f.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rep := capsReport{File: file, Kind: "document"}
	format := negotiate.FormatOf(file)
	var doc *negotiate.Document
	if format == negotiate.FormatTOML && isConfig(src) {
		rep.Kind = "config"
		var cfg *node.Config
		if cfg, err = node.ParseConfig(src); err == nil {
			doc, err = cfg.Document("did:key:(this daemon)")
		}
	} else {
		var order *conditions.TierOrder
		if h, herr := f.homeDir(e); herr == nil {
			if cfg, cerr := node.LoadConfig(h.ConfigPath()); cerr == nil {
				order, _ = cfg.TierOrder()
			}
		}
		doc, err = negotiate.LoadDocument(src, format, order)
	}
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
		for _, c := range doc.Capabilities {
			rep.Capabilities = append(rep.Capabilities, c.Name)
		}
	}
	if f.json {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else if rep.Valid {
		fmt.Fprintf(e.stdout, "%s: valid %s, %d capabilities: %s\n", file, rep.Kind, len(rep.Capabilities), strings.Join(rep.Capabilities, ", "))
	} else {
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
// standalone capability document (which has ifp).
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

// configProblems lists the problems in a config or document error.
func configProblems(err error) []error {
	var ce *node.ConfigError
	if errors.As(err, &ce) {
		err = ce.Err
	}
	return negotiate.Errors(err)
}
