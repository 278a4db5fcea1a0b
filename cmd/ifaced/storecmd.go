package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ifaced/ifaced/node/store"
)

// `ifaced store salvage` is the repair path for a damaged store file
// (ifaced.db): `ifaced run` refuses one with store.ErrDamaged and names
// this command. It needs the daemon stopped (the store's lock says so).

// storeSubs are the subcommands of `store`.
var storeSubs = []string{"salvage"}

// damagedStoreHint is what `ifaced run` adds to a damaged store's error.
func damagedStoreHint(home string) string {
	return fmt.Sprintf("to repair it: `ifaced store salvage --home %s` copies every record it can read into a new ifaced.db and keeps the damaged file beside it; or move ifaced.db aside and start again with an empty store (the key and config.toml are not in it; what is lost is listed in docs/operations.md, \"A damaged store\")", home)
}

func runStore(_ context.Context, e *env, args []string) error {
	name := "store"
	if len(args) > 0 && args[0] == "salvage" {
		name, args = "store salvage", args[1:]
	}
	f := newFlags(e, name, "", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if name == "store" {
		return usageError("store takes a subcommand: store salvage [--home DIR]")
	}
	if f.NArg() > 0 {
		return usageError("store salvage takes no arguments (the home is --home DIR), got %q", f.Args())
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	rep, err := store.Salvage(filepath.Join(h.Dir, "ifaced.db"))
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(e.stdout, "salvaged %s: copied %d keys in %d buckets into a new store\n", rep.Path, rep.Keys, rep.Buckets)
	fmt.Fprintf(e.stdout, "the damaged file is kept as %s\n", rep.Damaged)
	if len(rep.Lost) == 0 {
		fmt.Fprintln(e.stdout, "everything was readable")
	} else {
		fmt.Fprintln(e.stdout, "could not read:")
		for _, l := range rep.Lost {
			fmt.Fprintf(e.stdout, "  %s\n", l)
		}
	}
	fmt.Fprintln(e.stdout, "start the daemon again with `ifaced run`")
	return nil
}
