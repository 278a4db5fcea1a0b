package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// keySubs are the subcommands of `key`.
var keySubs = []string{"rotate", "revoke", "revocation-statement", "commit-next"}

// runKey is
//
//	ifaced key commit-next --out FILE [--replace]  make the next key, commit to its digest (pre-rotation)
//	ifaced key rotate [--transition D] [--next-key FILE] [--commit-next FILE2]
//	ifaced key revoke [OLD-PEER] [--reason R]    revoke the key this daemon's key succeeded
//	ifaced key revoke --statement FILE           publish a revocation statement prepared earlier
//	ifaced key revocation-statement [--out FILE] [--reason R] [--key FILE]
//
// commit-next, rotate and revoke work on the data directory with the
// daemon stopped (keys.RotateKey: the key is the daemon's identity, and
// every part of a running daemon holds it); its next start delivers the
// statement to every peer it knows. revocation-statement only reads the
// key, so the daemon may be running: keep what it prints offline, apart
// from the key; so with the next key commit-next writes.
func runKey(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "key", "rotate | revoke [OLD-PEER] | revocation-statement | commit-next", true)
	transition := f.Duration("transition", 0, "rotate: how long the old key still verifies (default trust.key_transition)")
	reason := f.String("reason", "", "revoke, revocation-statement: why, in a few words (at most 256 bytes; peers see it)")
	statement := f.String("statement", "", "revoke: publish this revocation statement (a FILE from `ifaced key revocation-statement`)")
	out := f.String("out", "", "revocation-statement: write it to FILE (mode 0600, never overwritten) instead of standard output; commit-next: write the next key to FILE (required; keep it offline)")
	keyFile := f.String("key", "", "revocation-statement: the key to revoke (default this daemon's key; a retired key is under retired/ in the data directory)")
	nextKey := f.String("next-key", "", "rotate: the key to rotate to, the FILE `ifaced key commit-next` wrote (required once this daemon committed to its next key)")
	commitNext := f.String("commit-next", "", "rotate: also make the key after the new one, write it to FILE (mode 0600, never overwritten) and commit to it")
	replace := f.Bool("replace", false, "commit-next: replace a commitment already made (peers that saw it refuse the new one)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("key needs a subcommand: rotate, revoke, revocation-statement or commit-next")
	}
	sub, pos := pos[0], pos[1:]
	switch {
	case !slices.Contains(keySubs, sub):
		msg := fmt.Sprintf("key %q: want rotate, revoke, revocation-statement or commit-next", sub)
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
	case sub == "commit-next" && *out == "":
		return usageError("key commit-next needs --out FILE: where to write the next key (keep it offline, apart from the daemon's key)")
	case sub != "rotate" && (*nextKey != "" || *commitNext != ""):
		return usageError("--next-key and --commit-next are for key rotate")
	case sub != "commit-next" && *replace:
		return usageError("--replace is for key commit-next")
	case *commitNext != "" && *commitNext == *nextKey:
		return usageError("--commit-next %s: the key after the next goes to a file of its own, not the --next-key file", *commitNext)
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	now := time.Now()
	switch sub {
	case "rotate":
		if *transition == 0 {
			cfg, err := config.LoadConfig(h.ConfigPath())
			if err != nil && !errors.Is(err, config.ErrNoConfig) {
				return err
			}
			*transition = cfg.Trust.KeyTransition.Duration
		}
		rot, err := keys.RotateKey(h, *transition, now, keys.RotateOptions{NextKey: *nextKey, CommitNext: *commitNext})
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, rot)
		}
		fmt.Fprintf(e.stdout, "rotated: %s → %s\nthe old key verifies until %s; it is kept at %s\n",
			rot.Old, rot.New, rot.Statement.Until().UTC().Format(time.RFC3339), rot.RetiredKey)
		if *nextKey != "" {
			fmt.Fprintf(e.stdout, "the daemon's key is now the one from %s (a copy is in the data directory); that file may go\n", *nextKey)
		}
		fmt.Fprint(e.stdout, e.hint("start the daemon (`ifaced run`): it runs on the new key and sends the signed statement to every peer it knows\n"))
		if rot.Committed != "" {
			fmt.Fprintf(e.stdout, "the statement commits to the key after it (next_key_digest %s), written to %s: keep it offline, apart from the daemon's key\n",
				rot.Statement.NextKeyDigest, rot.Committed)
		} else {
			fmt.Fprint(e.stdout, e.hint("then commit to the next key (`ifaced key commit-next --out FILE`), so that no thief of this key can rotate it away\n"))
		}
		fmt.Fprint(e.stdout, e.hint("and prepare a revocation statement for the new key and keep it offline: `ifaced key revocation-statement --out FILE`\n"))
		return nil
	case "commit-next":
		c, err := keys.CommitNextKey(h, *out, *replace, now)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, c)
		}
		fmt.Fprintf(e.stdout, "the next key is written to %s: keep it offline, apart from the daemon's key\n", *out)
		fmt.Fprintf(e.stdout, "this key (%s) commits to it: next_key_digest %s\n", c.KeyID, c.NextKeyDigest)
		fmt.Fprint(e.stdout, e.hint("start the daemon (`ifaced run`): it sends the commitment to every peer it knows and in every greeting; a peer that saw it refuses a rotation to any other key\n"))
		fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("to rotate, stop the daemon and run `ifaced key rotate --next-key %s`\n", *out)))
		return nil
	case "revoke":
		if *statement != "" {
			raw, err := readBounded(*statement, 4096)
			if err != nil {
				return err
			}
			r, err := keys.PublishRevocation(h, raw, now)
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(e.stdout, r)
			}
			fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("revocation of %s recorded; start the daemon (`ifaced run`) to send it to every peer it knows\n", r.KeyID)))
			return nil
		}
		var old peer.ID
		if len(pos) == 1 {
			if old, err = peer.Decode(pos[0]); err != nil {
				return usageError("key revoke %q: want the peer ID of a key this daemon's key succeeded (%v)", pos[0], err)
			}
		}
		r, err := keys.RevokeOldKey(h, old, *reason, now)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, r)
		}
		fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("revocation of %s signed by its successor and recorded; start the daemon (`ifaced run`) to send it to every peer it knows\n", r.KeyID)))
		return nil
	default: // revocation-statement
		path := *keyFile
		if path == "" {
			path = h.KeyPath()
		}
		r, err := keys.RevocationStatement(path, *reason, now)
		if err != nil {
			return err
		}
		w := e.stdout
		if *out != "" {
			// Its directory is made as commit-next makes the next key's
			// (mode 0700): the same --out, the same outcome.
			if err := os.MkdirAll(filepath.Dir(*out), 0o700); err != nil {
				return fmt.Errorf("--out %s: creating its directory: %w", *out, err)
			}
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
			fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("revocation statement for %s written to %s: keep it offline; `ifaced key revoke --statement %s` publishes it\n", r.KeyID, *out, *out)))
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
	if t.NextKeyDigest != "" {
		fmt.Fprintf(w, "next key\tcommitted: %s (a rotation to any other key is refused)\n", t.NextKeyDigest)
	}
	for _, e := range t.Keys {
		fmt.Fprintf(w, "key\t%s\n", keyEventLine(e))
	}
}

// keyEventLine describes one key lifecycle record: what, about whom, who
// signed it, how it came, when, and its class.
func keyEventLine(e trust.KeyRecord) string {
	line := e.Kind + " " + e.Direction
	switch {
	case e.Kind == "succession":
		line += fmt.Sprintf(" %s → %s", e.Peer, e.Successor)
	default:
		line += " of " + e.Peer
	}
	switch {
	case e.Direction == "given":
		line += ", given by this daemon"
	case e.SignedBy == "successor":
		line += ", signed by its successor " + e.Successor
	case e.SignedBy == "both":
		line += ", signed by both keys"
	case e.SignedBy != "":
		line += ", signed by the key itself"
	}
	if e.Via != "" {
		line += ", via " + e.Via
	}
	line += fmt.Sprintf(", dated %s, recorded %s", formatTime(e.Date), formatTime(e.At))
	if !e.Until.IsZero() {
		line += ", old key verifies until " + formatTime(e.Until)
	}
	if e.NextKeyDigest != "" {
		line += ", next key " + e.NextKeyDigest
	}
	if e.Reason != "" {
		line += ", reason: " + quoteReason(e.Reason)
	}
	if e.Note != "" {
		line += "; " + e.Note
	}
	return line + " [" + e.Class + "]"
}

// quoteReason shows a peer's reason as the peer's words: quoted, cut to
// 128 bytes.
func quoteReason(r string) string {
	if len(r) > 128 {
		r = r[:128] + "…"
	}
	return fmt.Sprintf("%q", r)
}
