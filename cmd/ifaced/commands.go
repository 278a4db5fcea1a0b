package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
)

func (f *flags) homeDir(e *env) (config.Home, error) {
	if f.home == "" {
		f.home = e.getenv(config.EnvHome)
	}
	return config.ResolveHome(f.home)
}

// idInfo is what `init` and `id` print.
type idInfo struct {
	PeerID      string `json:"peer_id"`
	DID         string `json:"did"`
	KeyID       string `json:"key_id"`
	Fingerprint string `json:"fingerprint"`
	Home        string `json:"home"`
}

func printID(w io.Writer, asJSON bool, id *identity.Identity, h config.Home) error {
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
	field := f.String("field", "", "print only this field, for scripts: peer_id, did, key_id, fingerprint or home (e.g. ALICE=$(ifaced id --field peer_id))")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("id takes no arguments, got %q", f.Args())
	}
	if *field != "" && !slices.Contains(idFields, *field) {
		msg := fmt.Sprintf("--field %q: want one of %s", *field, strings.Join(idFields, ", "))
		if s := suggest(*field, idFields); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return usageError("%s", msg)
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return err
	}
	if *field != "" {
		info := idInfo{id.PeerID().String(), id.DID(), id.KeyID(), id.Fingerprint(), h.Dir}
		fmt.Fprintln(e.stdout, map[string]string{"peer_id": info.PeerID, "did": info.DID, "key_id": info.KeyID,
			"fingerprint": info.Fingerprint, "home": info.Home}[*field])
		return nil
	}
	return printID(e.stdout, f.json, id, h)
}

// idFields are the fields `id --field` prints, as --json names them.
var idFields = []string{"peer_id", "did", "key_id", "fingerprint", "home"}

// configProblems lists the problems in a config or document error.
func configProblems(err error) []error {
	var ce *config.ConfigError
	if errors.As(err, &ce) {
		err = ce.Err
	}
	return negotiate.Errors(err)
}
