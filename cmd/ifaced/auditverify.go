package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/config"
)

// The audit log's proofs on the command line (docs/audit.md): `audit
// verify` checks a home's tamper-evident log, `audit export` writes an
// evidence bundle, `audit verify-bundle` checks one. None needs the
// daemon: they read the home (or the bundle) directly, and only read, so
// they run beside a running daemon too.

// auditSubs are the subcommands of `audit`.
var auditSubs = []string{"verify", "export", "verify-bundle"}

// runAuditSub runs `audit verify | export | verify-bundle`.
func runAuditSub(ctx context.Context, e *env, sub string, args []string) error {
	switch sub {
	case "verify":
		return runAuditVerify(ctx, e, args)
	case "export":
		return runAuditExport(ctx, e, args)
	default:
		return runAuditVerifyBundle(ctx, e, args)
	}
}

// keyList is a repeatable --key flag of did:keys.
type keyList []string

func (k *keyList) String() string { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error {
	if _, err := identity.PublicKeyFromDID(v); err != nil {
		return fmt.Errorf("%q is not a did:key (`ifaced id` prints a daemon's): %v", v, err)
	}
	*k = append(*k, v)
	return nil
}

func (k keyList) trusts(did string) bool { return slices.Contains(k, did) }

// homeKeys are the keys whose checkpoints a home's log holds: its key's
// and its retired keys'.
func homeKeys(h config.Home) (keyList, error) {
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return nil, fmt.Errorf("reading the home's key to know which checkpoints are its own (or name the daemon's keys with --key DID): %w", err)
	}
	return append(keyList{id.DID()}, h.RetiredDIDs()...), nil
}

func runAuditVerify(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "audit verify", "", true)
	var keys keyList
	f.Var(&keys, "key", "a did:key of the daemon whose checkpoints count (repeat for keys it rotated from); default the home's key and its retired keys")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("audit verify takes no arguments (the home is --home DIR), got %q", f.Args())
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		if keys, err = homeKeys(h); err != nil {
			return err
		}
	}
	dir := filepath.Join(h.Dir, "audit")
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("verifying the audit log: %w", err)
	}
	rep, err := gossip.VerifyAuditLog(dir, gossip.VerifyOptions{Trusted: keys.trusts})
	if f.json {
		if werr := writeJSON(e.stdout, rep); werr != nil {
			return werr
		}
	}
	var failure *gossip.VerifyFailure
	switch {
	case errors.As(err, &failure):
		return &exitError{code: 1, err: fmt.Errorf("the audit log in %s does not verify: %s", dir, filepath.Join("audit", failure.Error()))}
	case err != nil:
		return err
	}
	if !f.json {
		printVerifyReport(e.stdout, dir, rep)
	}
	return nil
}

func printVerifyReport(w io.Writer, dir string, rep *gossip.VerifyReport) {
	fmt.Fprintf(w, "the audit log in %s verifies\n", dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  days\t%d with a tamper-evident tree\n", rep.Days)
	fmt.Fprintf(tw, "  records\t%d, each where its tree says, byte for byte\n", rep.Records)
	fmt.Fprintf(tw, "  checkpoints\t%d, signed by %s\n", rep.Checkpoints, orDash(strings.Join(rep.Signers, ", ")))
	received := fmt.Sprintf("%d messages, each signed by its sender", rep.Received)
	if rep.Unsigned > 0 {
		received += fmt.Sprintf("; %d unsigned (anonymous HTTP callers)", rep.Unsigned)
	}
	if rep.Unchecked > 0 {
		received += fmt.Sprintf("; %d whose sender's key cannot be known offline", rep.Unchecked)
	}
	fmt.Fprintf(tw, "  received\t%s\n", received)
	if rep.Pruned > 0 || len(rep.PrunedDays) > 0 {
		fmt.Fprintf(tw, "  pruned\t%d records and %d days deleted by policy, as recorded before they went\n", rep.Pruned, len(rep.PrunedDays))
		for _, n := range append(slices.Clone(rep.PrunedNotes), rep.PrunedDays...) {
			fmt.Fprintf(tw, "\t%s\n", n)
		}
	}
	if len(rep.Untracked) > 0 {
		fmt.Fprintf(tw, "  untracked\t%s: recorded before the log was tamper-evident, not verified\n", strings.Join(rep.Untracked, ", "))
	}
	if rep.Adopted > 0 {
		fmt.Fprintf(tw, "  adopted\t%d bytes recorded before the log was tamper-evident, pinned by their hash\n", rep.Adopted)
	}
	if rep.Recovered > 0 {
		fmt.Fprintf(tw, "  recovered\t%d records appended to the tree again after a crash\n", rep.Recovered)
	}
	if rep.Open {
		fmt.Fprintf(tw, "  open\tthe log is open (a daemon runs) or did not close: %d records not in a checkpoint yet are not verified\n", rep.Pending)
	}
	tw.Flush()
}

func runAuditExport(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "audit export", "", false)
	conv := f.String("conversation", "", "export this conversation's records (the owner's evidence: decisions included)")
	msg := f.String("message", "", "export this one message's record (for a message a peer sent, the receipt to hand to that peer)")
	out := f.String("out", "", "write the bundle to FILE (mode 0600, never overwritten) instead of standard output")
	var keys keyList
	f.Var(&keys, "key", "a did:key of the daemon whose checkpoints count; default the home's key and its retired keys")
	if err := f.parse(args); err != nil {
		return err
	}
	switch {
	case f.NArg() > 0:
		return usageError("audit export takes no arguments (--conversation ID or --message ID), got %q", f.Args())
	case (*conv == "") == (*msg == ""):
		return usageError("audit export needs --conversation ID or --message ID (one of them; `ifaced audit` lists conversations)")
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		if keys, err = homeKeys(h); err != nil {
			return err
		}
	}
	b, err := gossip.ExportBundle(filepath.Join(h.Dir, "audit"), gossip.BundleSelect{ConversationID: *conv, MessageID: *msg}, keys.trusts)
	if err != nil {
		return err
	}
	raw, err := b.File()
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = e.stdout.Write(raw)
		return err
	}
	fd, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	if _, err := fd.Write(raw); err != nil {
		fd.Close()
		return fmt.Errorf("writing the bundle: %w", err)
	}
	if err := fd.Close(); err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	cps := "checkpoint"
	if len(b.Checkpoints) > 1 {
		cps = fmt.Sprintf("%d checkpoints", len(b.Checkpoints))
	}
	fmt.Fprintf(e.stderr, "wrote %s: %d records, their inclusion proofs and the %s signed by %s (`ifaced audit verify-bundle %s` checks it anywhere)\n",
		*out, len(b.Records), cps, strings.Join(b.Keys, ", "), *out)
	return nil
}

func runAuditVerifyBundle(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "audit verify-bundle", "FILE", true)
	var keys keyList
	f.Var(&keys, "key", "a did:key you know as the daemon's: its checkpoints must be signed by one of these (repeatable); default any key the bundle lists, which is printed for you to compare")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usageError("audit verify-bundle takes one FILE (a bundle `ifaced audit export` wrote), got %q", f.Args())
	}
	fd, err := os.Open(f.Arg(0))
	if err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(fd, gossip.MaxBundleSize+1))
	fd.Close()
	if err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	var pinned func(string) bool
	if len(keys) > 0 {
		pinned = keys.trusts
	}
	rep, err := gossip.VerifyBundle(raw, pinned)
	if f.json {
		if werr := writeJSON(e.stdout, rep); werr != nil {
			return werr
		}
	}
	if err != nil {
		return fmt.Errorf("%s does not verify: %w", f.Arg(0), err)
	}
	if !f.json {
		printBundleReport(e.stdout, f.Arg(0), rep, pinned != nil)
	}
	return nil
}

func printBundleReport(w io.Writer, file string, rep *gossip.BundleReport, pinned bool) {
	what := "conversation " + rep.ConversationID
	if rep.MessageID != "" {
		what = "message " + rep.MessageID
	}
	fmt.Fprintf(w, "%s verifies: the bundle of %s\n", file, what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	signers := strings.Join(rep.Keys, ", ")
	if pinned {
		fmt.Fprintf(tw, "  signed by\t%s, a key you named\n", signers)
	} else {
		fmt.Fprintf(tw, "  signed by\t%s (compare it with the daemon's did:key, which `ifaced id` prints; or pass --key)\n", signers)
	}
	for _, c := range rep.Checkpoints {
		fmt.Fprintf(tw, "  checkpoint\t%s: a tree of %d records, root %s, signed %s\n", c.Origin, c.Size, c.Root, c.Time.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "  records\t%d, each included in its checkpoint\n", len(rep.Records))
	tw.Flush()
	for _, r := range rep.Records {
		sig := "signed by the peer"
		switch r.Signature {
		case "daemon":
			sig = "signed by the daemon"
		case "peer":
		default:
			sig = r.Signature
		}
		line := fmt.Sprintf("    %s %-8s %s %s leaf %d: %s (%s)", r.At.Format(time.RFC3339), r.Direction, r.Peer, r.Phase, r.Leaf, r.MessageID, sig)
		if r.Decision {
			line += ", with the owner's decision"
		}
		fmt.Fprintln(w, line)
	}
}
