package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
)

// The trust verbs:
//
//	ifaced trust                                   list the trust and key lifecycle records
//	ifaced trust PEER [--verify FINGERPRINT | --revoke | --check | --forget]
//	ifaced introduce --label NAME [--expires 7d] [--disclosure TIER] [--persona P]
//	ifaced introduce --list | --revoke ID
//	ifaced accept-intro [- | --secret-file FILE]      the token on standard input, or in FILE

func runTrust(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "trust", "[PEER [--verify FINGERPRINT | --revoke | --check | --forget]]", true)
	verify := f.String("verify", "", "pin PEER's key: the fingerprint (SHA256:…) you compared with its owner out of band")
	revoke := f.Bool("revoke", false, "revoke trust in PEER's key (and the keys it rotated from or to): unpin it and refuse its messages")
	check := f.Bool("check", false, "fetch PEER's identity document now and show the level it reaches")
	forget := f.Bool("forget", false, "forget PEER's trust record and the key statements about its key: it is a stranger again")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	actions := 0
	for _, set := range []bool{*verify != "", *revoke, *check, *forget} {
		if set {
			actions++
		}
	}
	switch {
	case len(pos) > 1:
		return usageError("trust takes at most one PEER, got %q", pos)
	case actions > 1:
		return usageError("trust takes one of --verify, --revoke, --check or --forget")
	case actions == 1 && len(pos) == 0:
		return usageError("--verify, --revoke, --check and --forget need a PEER")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(pos) == 1 {
		if pos[0], err = f.peerRef(ctx, c, pos[0], false); err != nil {
			return err
		}
	}
	if len(pos) == 0 {
		list, err := c.Trust(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, list)
		}
		printTrustList(e.stdout, list)
		return nil
	}
	var info *trust.Info
	switch {
	case *verify != "":
		info, err = c.TrustPeer(ctx, pos[0], api.TrustAction{Verify: *verify})
	case *revoke:
		info, err = c.TrustPeer(ctx, pos[0], api.TrustAction{Revoke: true})
	case *check:
		info, err = c.TrustPeer(ctx, pos[0], api.TrustAction{Check: true})
	case *forget:
		info, err = c.TrustPeer(ctx, pos[0], api.TrustAction{Forget: true})
	default:
		info, err = c.PeerTrust(ctx, pos[0])
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, info)
	}
	switch {
	case *verify != "":
		fmt.Fprintf(e.stdout, "pinned %s: %s is now at level %s\n\n", info.PinnedKey, info.Peer, info.Level)
	case *revoke:
		fmt.Fprintf(e.stdout, "revoked trust in key %s: %s has no level and its messages are refused\n", info.RevokedKey, info.Peer)
		if len(info.RevokedAlso) > 0 {
			fmt.Fprintf(e.stdout, "revoked with it, as keys of the same identity (successions followed between them): %s\n", strings.Join(info.RevokedAlso, ", "))
		}
		fmt.Fprintln(e.stdout)
	case *forget:
		if len(info.Forgot) == 0 {
			fmt.Fprintf(e.stdout, "nothing was held about %s's key\n\n", info.Peer)
		} else {
			fmt.Fprintf(e.stdout, "forgot about %s: %s\n\n", info.Peer, strings.Join(info.Forgot, ", "))
		}
	case *check:
		if f := info.CheckFailure; f != nil && info.Check != nil {
			fmt.Fprintln(e.stdout, describeCheck(f))
			fmt.Fprintf(e.stdout, "the check of %s stands until %s: %s\n", formatTime(info.Check.CheckedAt), formatTime(info.CheckStandsUntil), describeCheck(info.Check))
		} else {
			fmt.Fprintln(e.stdout, describeCheck(info.Check))
		}
		fmt.Fprintln(e.stdout)
	}
	printTrust(e.stdout, info)
	return nil
}

// describeCheck says what an identity document check reached, or why not.
func describeCheck(c *store.DocCheck) string {
	if c == nil {
		return "no identity document checked"
	}
	if c.Level > int(conditions.Signed) {
		return fmt.Sprintf("identity document: level %s reached: %s", conditions.Level(c.Level), c.Reason)
	}
	why := map[string]string{
		trust.CheckFetchFailed:     "fetch failed",
		trust.CheckInvalidDocument: "not a valid document",
		trust.CheckKeyNotListed:    "key not listed",
		trust.CheckKeyRetired:      "key retired",
		trust.CheckKeyRevoked:      "key revoked",
		trust.CheckIDMismatch:      "id mismatch",
		trust.CheckNotFetched:      "nothing to fetch",
		trust.CheckNoAgentID:       "no agent_id known",
	}[c.Outcome]
	if why == "" {
		why = c.Outcome
	}
	return fmt.Sprintf("identity document: no level beyond %s: %s: %s", conditions.Signed, why, c.Reason)
}

func printTrustList(w io.Writer, list []trust.Info) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no trust records: every peer is at level 1 (signed) until you pin its key (ifaced trust PEER --verify FINGERPRINT),")
		fmt.Fprintln(w, "it proves an introduction token you minted (ifaced introduce), or its identity document lists its key")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tLEVEL\tCLASS\tHOW\tSINCE")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Peer, t.Level, orDash(t.Class), strings.Join(t.How, "; "), formatTime(t.Since))
	}
	tw.Flush()
	for _, t := range list {
		for _, k := range t.Keys {
			if k.Peer == t.Peer { // a succession shows once, under its old key
				fmt.Fprintf(w, "%s: key %s\n", t.Peer, keyEventLine(k))
			}
		}
		if t.Refusal != "" {
			fmt.Fprintf(w, "%s: introduction refused %s: %s\n", t.Peer, formatTime(t.RefusedAt), t.Refusal)
		}
		if f := t.CheckFailure; f != nil {
			fmt.Fprintf(w, "%s: identity document check failed %s (the earlier check stands until %s): %s\n",
				t.Peer, formatTime(f.CheckedAt), formatTime(t.CheckStandsUntil), f.Reason)
		}
	}
}

func printTrust(w io.Writer, t *trust.Info) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "peer\t%s\n", t.Peer)
	fmt.Fprintf(tw, "fingerprint\t%s\n", t.Fingerprint)
	fmt.Fprintf(tw, "level\t%s\n", t.Level)
	fmt.Fprintf(tw, "how\t%s\n", strings.Join(t.How, "; "))
	if !t.Since.IsZero() {
		fmt.Fprintf(tw, "since\t%s\n", formatTime(t.Since))
	}
	if t.AgentID != "" {
		fmt.Fprintf(tw, "agent_id\t%s (bound)\n", t.AgentID)
	}
	if t.PinnedKey != "" {
		fmt.Fprintf(tw, "pinned\t%s on %s\n", t.PinnedKey, formatTime(t.PinnedAt))
	}
	if t.Class != "" {
		fmt.Fprintf(tw, "class\t%s\n", t.Class)
	}
	if t.RevokedKey != "" {
		fmt.Fprintf(tw, "revoked\t%s on %s\n", t.RevokedKey, formatTime(t.RevokedAt))
	}
	if t.RevokedBy != "" {
		fmt.Fprintf(tw, "revoked by\t%s\n", revokedByText(t))
	}
	printKeyEvents(tw, t) // key.go
	for _, in := range t.Intros {
		grants := "no tier"
		if in.Disclosure != "" {
			p := in.Persona
			if p == "" {
				p = "default"
			}
			grants = in.Disclosure + " under " + p
		}
		fmt.Fprintf(tw, "introduced\ttoken %s (%q), %s, until %s\n", in.TokenID, in.Label, grants, formatTime(in.Expires))
	}
	if t.Check != nil {
		stands := ""
		if !t.CheckStandsUntil.IsZero() {
			stands = ", stands until " + formatTime(t.CheckStandsUntil)
		}
		fmt.Fprintf(tw, "document\t%s (%s, checked %s%s)\n", orDash(t.Check.AgentID), t.Check.Outcome, formatTime(t.Check.CheckedAt), stands)
	}
	if f := t.CheckFailure; f != nil {
		fmt.Fprintf(tw, "check failed\t%s: %s\n", formatTime(f.CheckedAt), f.Reason)
	}
	if t.Refusal != "" {
		fmt.Fprintf(tw, "refused\t%s: %s\n", formatTime(t.RefusedAt), t.Refusal)
	}
	tw.Flush()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func runIntroduce(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "introduce", "--label NAME [--expires 7d] [--disclosure TIER] [--persona P] | --list | --revoke ID", true)
	label := f.String("label", "", "who the token is for (\"Bob from the conference\")")
	expires := f.String("expires", "", "how long the token may be used: 7d, 36h, 90m (default trust.intro_expiry)")
	disclosure := f.String("disclosure", "", "the least disclosure tier the peer who uses the token is granted")
	persona := f.String("persona", "", "the persona that tier applies under (default: the owner's default context)")
	list := f.Bool("list", false, "list the tokens this daemon minted and those it holds")
	revoke := f.String("revoke", "", "revoke the token with this ID")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	minting := *label != "" || *expires != "" || *disclosure != "" || *persona != ""
	switch {
	case len(pos) > 0:
		return usageError("introduce takes flags only, got %q", pos)
	case *list && (*revoke != "" || minting), *revoke != "" && minting:
		return usageError("introduce takes --label (with its options), --list or --revoke ID")
	case !*list && *revoke == "" && *label == "":
		return usageError("introduce needs --label NAME: who is the token for?")
	}
	var ttl time.Duration
	if *expires != "" {
		if ttl, err = parseExpiry(*expires); err != nil {
			return usageError("--expires: %v", err)
		}
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case *list:
		l, err := c.Introductions().List(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, l)
		}
		printIntros(e.stdout, l)
		return nil
	case *revoke != "":
		info, err := c.Introductions().Revoke(ctx, *revoke)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, info)
		}
		fmt.Fprintf(e.stdout, "revoked introduction token %s (%q)", info.ID, info.Label)
		if info.BoundPeer != "" {
			fmt.Fprintf(e.stdout, "; %s no longer gets its tier", info.BoundPeer)
		}
		fmt.Fprintln(e.stdout)
		return nil
	}
	m, err := c.Introductions().Mint(ctx, api.IntroRequest{Label: *label, ExpiresSeconds: int64(ttl / time.Second),
		Disclosure: *disclosure, Persona: *persona})
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, m)
	}
	w := e.stdout
	fmt.Fprintf(w, "introduction token %s for %q, valid until %s", m.ID, m.Label, formatTime(m.Expires))
	if m.Disclosure != "" {
		p := m.Persona
		if p == "" {
			p = "default"
		}
		fmt.Fprintf(w, ", granting at least %s under %s", m.Disclosure, p)
	}
	fmt.Fprintf(w, ":\n\n%s\n\n", m.Token)
	fmt.Fprintln(w, "Hand it to the other human by a channel you trust; on their daemon they run")
	fmt.Fprintln(w, "  ifaced accept-intro                          (and paste it), or")
	fmt.Fprintln(w, "  ifaced accept-intro --secret-file FILE       (a file holding it)")
	fmt.Fprintln(w, "never with the token on the command line, where other users of their machine could read it.")
	fmt.Fprintln(w, "The first daemon that proves it holds the token binds it. It is not shown again;")
	fmt.Fprintf(w, "`ifaced introduce --list` shows its state, `ifaced introduce --revoke %s` revokes it.\n", m.ID)
	return nil
}

// parseExpiry reads a lifetime with the config's duration parser
// (config.ParseDuration): "7d", "2w", "36h", "1d12h".
func parseExpiry(s string) (time.Duration, error) {
	d, err := config.ParseDuration(s)
	if err != nil || d <= 0 || d > 100*365*24*time.Hour {
		return 0, fmt.Errorf("%q: want a positive lifetime such as 7d, 2w or 36h", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("%q: a token must last at least a second", s)
	}
	return d, nil
}

func printIntros(w io.Writer, l *api.IntroList) {
	if len(l.Issued) == 0 && len(l.Held) == 0 {
		fmt.Fprintln(w, "no introduction tokens (mint one with `ifaced introduce --label NAME`)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(l.Issued) > 0 {
		fmt.Fprintln(tw, "MINTED\tLABEL\tSTATE\tEXPIRES\tGRANTS\tBOUND TO")
		for _, in := range l.Issued {
			grants := "-"
			if in.Disclosure != "" {
				grants = in.Disclosure
				if in.Persona != "" {
					grants += " under " + in.Persona
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Label, in.State, formatTime(in.Expires), grants, orDash(in.BoundPeer))
		}
	}
	if len(l.Held) > 0 {
		if len(l.Issued) > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "HELD\tLABEL\tFROM\tEXPIRES")
		for _, in := range l.Held {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.ID, in.Label, in.IssuerPeer, formatTime(in.Expires))
		}
	}
	tw.Flush()
}

// runAcceptIntro is `accept-intro`: it reads the token from standard
// input (no argument, or "-") or from --secret-file, never from the
// command line, where every user of the machine can read it (ps,
// /proc/PID/cmdline) and the shell's history keeps it. A token given as
// an argument is refused, saying how to pass it.
func runAcceptIntro(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "accept-intro", "[-] (the token on standard input) | --secret-file FILE", true)
	file := f.String("secret-file", "", "read the token from FILE (\"-\": standard input) instead of standard input")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 1 || len(pos) == 1 && pos[0] != "-":
		return usageError("accept-intro does not take the token on the command line, where every user of this machine can read it (ps, /proc) and your shell's history keeps it: " +
			"run `ifaced accept-intro` and paste it, or pass it with `ifaced accept-intro < FILE` or `--secret-file FILE`; nothing was accepted " +
			"(if others can read that history, ask the issuer to revoke the token and mint a new one)")
	case len(pos) == 1 && *file != "":
		return usageError("accept-intro takes the token from standard input (-) or --secret-file, not both")
	}
	token, err := readSecret(e, *file, "introduction token (the ifintro1… string the issuer's `ifaced introduce` printed)")
	if err != nil {
		return err
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Introductions().Accept(ctx, token)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, h)
	}
	fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("holding introduction token %s (%q) from %s, valid until %s;\ngreetings to that peer now carry its proof (greet it: `ifaced greet %s`)\n",
		h.ID, h.Label, h.IssuerPeer, formatTime(h.Expires), h.IssuerPeer)))
	return nil
}

// maxSecret bounds what readSecret reads: a token is well under it.
const maxSecret = 64 << 10

// readSecret reads a secret (what names it) from file, or from standard
// input when file is "" or "-": its content with surrounding white space
// removed. On a terminal it asks for it and reads one line. A file that
// other users may read is read all the same, with a warning.
func readSecret(e *env, file, what string) (string, error) {
	var (
		b    []byte
		err  error
		from = "standard input"
	)
	if file != "" && file != "-" {
		from = file
		var st os.FileInfo
		if st, err = os.Stat(file); err == nil && st.Mode().Perm()&0o044 != 0 {
			fmt.Fprintf(e.stderr, "warning: %s may be read by other users (mode %#o): it holds a secret; `chmod go-r` it, or delete it once used\n", file, st.Mode().Perm())
		}
		var fh *os.File
		if fh, err = os.Open(file); err == nil {
			b, err = io.ReadAll(io.LimitReader(fh, maxSecret+1))
			fh.Close()
		}
	} else if in, tty := e.stdin.(*os.File); tty && isTerminal(in) {
		fmt.Fprintf(e.stderr, "paste the %s, then Enter:\n", what)
		var line string
		line, err = bufio.NewReaderSize(io.LimitReader(in, maxSecret+1), 4096).ReadString('\n')
		if err == io.EOF {
			err = nil
		}
		b = []byte(line)
	} else if e.stdin != nil {
		b, err = io.ReadAll(io.LimitReader(e.stdin, maxSecret+1))
	}
	switch s := strings.TrimSpace(string(b)); {
	case err != nil:
		return "", fmt.Errorf("reading the %s from %s: %w", what, from, err)
	case len(b) > maxSecret:
		return "", usageError("%s holds more than %d bytes: want only the %s", from, maxSecret, what)
	case s == "":
		return "", usageError("no %s on %s: pipe it in (`ifaced accept-intro < FILE`), paste it when asked, or name a file with --secret-file FILE", what, from)
	default:
		return s, nil
	}
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && st.Mode()&os.ModeDevice != 0
}

// revokedByText says who revoked a peer's key and how it came, for people.
func revokedByText(t *trust.Info) string {
	switch t.RevokedBy {
	case "owner":
		s := "you (ifaced trust --revoke)"
		if t.RevokedWith != "" {
			s += ", with " + t.RevokedWith + ", a key of the same identity"
		}
		if len(t.RevokedAlso) > 0 {
			s += "; revoked with it: " + strings.Join(t.RevokedAlso, ", ")
		}
		return s
	case "successor":
		return fmt.Sprintf("a revocation statement signed by its successor, received via %s on %s", orDash(t.RevokedVia), formatTime(t.RevokedAt))
	}
	return fmt.Sprintf("a revocation statement signed by the key itself, received via %s on %s", orDash(t.RevokedVia), formatTime(t.RevokedAt))
}
