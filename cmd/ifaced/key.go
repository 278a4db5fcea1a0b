package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// keySubs are the subcommands of `key`.
var keySubs = []string{"rotate", "revoke", "revocation-statement"}

// runKey is
//
//	ifaced key rotate [--transition D]           a new key and the succession statement
//	ifaced key revoke [OLD-PEER] [--reason R]    revoke the key this daemon's key succeeded
//	ifaced key revoke --statement FILE           publish a revocation statement prepared earlier
//	ifaced key revocation-statement [--out FILE] [--reason R] [--key FILE]
//
// rotate and revoke work on the data directory with the daemon stopped
// (node.RotateKey: the key is the daemon's identity, and every part of a
// running daemon holds it); its next start delivers the statement to every
// peer it knows. revocation-statement only reads the key, so the daemon may
// be running: keep what it prints offline, apart from the key.
func runKey(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "key", "rotate | revoke [OLD-PEER] | revocation-statement", true)
	transition := f.Duration("transition", 0, "rotate: how long the old key still verifies (default trust.key_transition)")
	reason := f.String("reason", "", "revoke, revocation-statement: why, in a few words (at most 256 bytes; peers see it)")
	statement := f.String("statement", "", "revoke: publish this revocation statement (a FILE from `ifaced key revocation-statement`)")
	out := f.String("out", "", "revocation-statement: write it to FILE (mode 0600, never overwritten) instead of standard output")
	keyFile := f.String("key", "", "revocation-statement: the key to revoke (default this daemon's key; a retired key is under retired/ in the data directory)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("key needs a subcommand: rotate, revoke or revocation-statement")
	}
	sub, pos := pos[0], pos[1:]
	switch {
	case !slices.Contains(keySubs, sub):
		msg := fmt.Sprintf("key %q: want rotate, revoke or revocation-statement", sub)
		if s := suggest(sub, keySubs); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return usageError("%s", msg)
	case sub == "revoke" && (len(pos) > 1 || (len(pos) == 1 && *statement != "")):
		return usageError("key revoke takes one OLD-PEER (a key this daemon's key succeeded), or --statement FILE, not both")
	case sub != "revoke" && len(pos) > 0:
		return usageError("key %s takes no arguments, got %q", sub, pos)
	case *transition < 0:
		return usageError("--transition %s: want a duration of zero or more (e.g. 168h)", *transition)
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	now := time.Now()
	switch sub {
	case "rotate":
		if *transition == 0 {
			cfg, err := node.LoadConfig(h.ConfigPath())
			if err != nil && !errors.Is(err, node.ErrNoConfig) {
				return err
			}
			*transition = cfg.Trust.KeyTransition.Duration
		}
		rot, err := node.RotateKey(h, *transition, now)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, rot)
		}
		fmt.Fprintf(e.stdout, "rotated: %s → %s\nthe old key verifies until %s; it is kept at %s\n",
			rot.Old, rot.New, rot.Statement.Until().UTC().Format(time.RFC3339), rot.RetiredKey)
		fmt.Fprintf(e.stdout, "start the daemon (`ifaced run`): it runs on the new key and sends the signed statement to every peer it knows\n")
		fmt.Fprintf(e.stdout, "then prepare a revocation statement for the new key and keep it offline: `ifaced key revocation-statement --out FILE`\n")
		return nil
	case "revoke":
		if *statement != "" {
			raw, err := readBounded(*statement, 4096)
			if err != nil {
				return err
			}
			r, err := node.PublishRevocation(h, raw, now)
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(e.stdout, r)
			}
			fmt.Fprintf(e.stdout, "revocation of %s recorded; start the daemon (`ifaced run`) to send it to every peer it knows\n", r.KeyID)
			return nil
		}
		var old peer.ID
		if len(pos) == 1 {
			if old, err = peer.Decode(pos[0]); err != nil {
				return usageError("key revoke %q: want the peer ID of a key this daemon's key succeeded (%v)", pos[0], err)
			}
		}
		r, err := node.RevokeOldKey(h, old, *reason, now)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, r)
		}
		fmt.Fprintf(e.stdout, "revocation of %s signed by its successor and recorded; start the daemon (`ifaced run`) to send it to every peer it knows\n", r.KeyID)
		return nil
	default: // revocation-statement
		path := *keyFile
		if path == "" {
			path = h.KeyPath()
		}
		r, err := node.RevocationStatement(path, *reason, now)
		if err != nil {
			return err
		}
		w := e.stdout
		if *out != "" {
			file, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("--out %s: the file exists; choose another (a statement is never overwritten)", *out)
			}
			if err != nil {
				return err
			}
			defer file.Close()
			w = file
		}
		if err := writeJSON(w, r); err != nil {
			return err
		}
		if *out != "" && !f.json {
			fmt.Fprintf(e.stdout, "revocation statement for %s written to %s: keep it offline; `ifaced key revoke --statement %s` publishes it\n", r.KeyID, *out, *out)
		}
		return nil
	}
}

// readBounded reads at most max bytes of a file, refusing a longer one.
func readBounded(path string, max int64) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	raw, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("%s: over %d bytes; a revocation statement is well under 1 KiB", path, max)
	}
	return raw, nil
}

// printKeyEvents adds to `ifaced trust PEER` the key statements about the
// peer: the key it was rotated from or to, and a revocation.
func printKeyEvents(w io.Writer, t *trust.Info) {
	if t.RotatedFrom != "" {
		fmt.Fprintf(w, "rotated from\t%s\n", t.RotatedFrom)
	}
	if t.SucceededBy != "" {
		fmt.Fprintf(w, "succeeded by\t%s\n", t.SucceededBy)
	}
	for _, e := range t.Keys {
		line := fmt.Sprintf("%s %s, dated %s", e.Kind, e.Direction, formatTime(e.Date))
		if !e.Until.IsZero() {
			line += ", old key verifies until " + formatTime(e.Until)
		}
		if e.Reason != "" {
			line += ", reason: " + e.Reason
		}
		if e.Note != "" {
			line += "; " + e.Note
		}
		fmt.Fprintf(w, "key\t%s\n", line)
	}
}
