package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A PEER on the command line is, in this order:
//
//  1. an alias of the owner's (`ifaced alias bob PEER`, node/alias): the
//     owner's own word, so it wins over anything a peer calls itself;
//  2. a peer ID, a did:key, or an agent ID (anything with ':' or '@'):
//     passed to the daemon as written, which resolves it (node/api);
//  3. a display name exactly one peer the daemon knows uses, looked up in
//     the daemon's peer list. Two peers using it is an error listing both.
//
// peerRef is that one resolver; every verb that takes a PEER calls it.
// A display name is the peer's own claim, so a verb that grants something
// (policy) takes aliases and IDs only: naming a peer by what it calls
// itself must not hand a stranger a tier.

// looksLikeID tells a peer ID, did or agent ID from a word.
func looksLikeID(s string) bool {
	if _, err := peer.Decode(s); err == nil {
		return true
	}
	return strings.ContainsAny(s, ":@")
}

// peerRef resolves ref for a verb. c may be nil: a display name then
// dials the daemon itself. grants is true for verbs that grant something,
// which do not take display names.
func (f *flags) peerRef(ctx context.Context, c *api.Client, ref string, grants bool) (string, error) {
	if ref == "" {
		return "", usageError("the PEER is empty")
	}
	book, err := f.aliases()
	if err != nil {
		return "", err
	}
	if pid, ok, err := book.Lookup(ref); err != nil {
		return "", err
	} else if ok {
		return pid.String(), nil
	}
	if looksLikeID(ref) {
		return ref, nil
	}
	if grants {
		return "", usageError("%q is not an alias or a peer ID; a display name is the peer's own claim, so grants take an alias (`ifaced alias NAME PEER`) or a peer ID%s",
			ref, f.nearAlias(ref))
	}
	if c == nil {
		if c, err = f.dial(f.e); err != nil {
			return "", usageError("%q is not an alias or a peer ID, and display names are looked up in the running daemon: %v", ref, err)
		}
		defer c.Close()
	}
	peers, err := c.Peers(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up the display name %q: %w", ref, err)
	}
	var found []string
	var displays []string
	for _, p := range peers {
		if p.Display != "" {
			displays = append(displays, p.Display)
		}
		if p.Display == ref && !slices.Contains(found, p.PeerID) {
			found = append(found, p.PeerID)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		msg := fmt.Sprintf("unknown peer %q: not an alias (`ifaced alias` lists them), a peer ID, or the display name of a peer this daemon knows (`ifaced peers`)", ref)
		names, _ := book.All()
		if s := suggest(ref, append(slices.Collect(maps.Keys(names)), displays...)); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return "", errors.New(msg) // a failed lookup, as the API's not_found: exit 1
	}
	return "", fmt.Errorf("%d known peers call themselves %q (%s): name one by its peer ID, or give it an alias with `ifaced alias NAME PEER_ID`",
		len(found), ref, strings.Join(found, ", "))
}

// nearAlias is "; did you mean …?" for a mistyped alias, or "".
func (f *flags) nearAlias(ref string) string {
	book, err := f.aliases()
	if err != nil {
		return ""
	}
	names, _ := book.All()
	if s := suggest(ref, slices.Collect(maps.Keys(names))); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// isAlias tells whether name is one of the owner's aliases.
func (f *flags) isAlias(name string) bool {
	book, err := f.aliases()
	if err != nil {
		return false
	}
	_, ok, _ := book.Lookup(name)
	return ok
}

func (f *flags) aliases() (*alias.File, error) {
	h, err := f.homeDir(f.e)
	if err != nil {
		return nil, err
	}
	return alias.Open(h.Dir), nil
}

// peerNames maps peer IDs to their aliases, so output can name a peer
// by the owner's word for it.
func peerNames(book *alias.File) map[string]string {
	out := map[string]string{}
	all, err := book.All()
	if err != nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		if _, taken := out[all[name].String()]; !taken {
			out[all[name].String()] = name
		}
	}
	return out
}

// runAlias is `alias` (list), `alias NAME PEER` (set) and `alias --remove
// NAME`.
func runAlias(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "alias", "[NAME PEER | --remove NAME]", true)
	remove := f.String("remove", "", "forget the alias NAME")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	switch {
	case *remove != "" && len(pos) > 0:
		return usageError("alias --remove NAME takes nothing else, got %q", pos)
	case *remove == "" && len(pos) != 0 && len(pos) != 2:
		return usageError("alias takes NAME and PEER (a peer ID, did:key, another alias, or a known peer's display name), or nothing to list them")
	}
	book, err := f.aliases()
	if err != nil {
		return err
	}
	switch {
	case *remove != "":
		pid, err := book.Remove(*remove)
		if errors.Is(err, alias.ErrNotFound) {
			return fmt.Errorf("no alias %q%s", *remove, f.nearAlias(*remove))
		}
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, aliasEntry{*remove, pid.String()})
		}
		fmt.Fprintf(e.stdout, "removed alias %s (was %s)\n", *remove, pid)
		return nil
	case len(pos) == 2:
		if err := alias.CheckName(pos[0]); err != nil {
			return usageError("%v", err)
		}
		pid, err := f.aliasTarget(ctx, pos[1])
		if err != nil {
			return err
		}
		before, err := book.Set(pos[0], pid)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, aliasEntry{pos[0], pid.String()})
		}
		switch {
		case before == "":
			fmt.Fprintf(e.stdout, "%s is now %s\n", pos[0], pid)
		case before == pid:
			fmt.Fprintf(e.stdout, "%s is already %s\n", pos[0], pid)
		default:
			fmt.Fprintf(e.stdout, "%s is now %s (was %s)\n", pos[0], pid, before)
		}
		return nil
	}
	all, err := book.All()
	if err != nil {
		return err
	}
	list := []aliasEntry{}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		list = append(list, aliasEntry{name, all[name].String()})
	}
	if f.json {
		return writeJSON(e.stdout, aliasList{list})
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stdout, e.hint("no aliases (name a peer with `ifaced alias NAME PEER`)"))
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALIAS\tPEER")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\n", a.Alias, a.Peer)
	}
	return tw.Flush()
}

type aliasEntry struct {
	Alias string `json:"alias"`
	Peer  string `json:"peer"`
}

type aliasList struct {
	Aliases []aliasEntry `json:"aliases"`
}

// aliasTarget is the peer ID an alias is set to: what ref resolves to,
// with a did:key turned into its peer ID and an agent ID into the peer
// the daemon established it for.
func (f *flags) aliasTarget(ctx context.Context, ref string) (peer.ID, error) {
	if pid, err := peer.Decode(ref); err == nil {
		return pid, nil
	}
	if strings.HasPrefix(ref, "did:key:") {
		pub, err := identity.PublicKeyFromDID(ref)
		if err != nil {
			return "", usageError("%v", err)
		}
		return identity.PeerIDFromPublicKey(pub)
	}
	resolved, err := f.peerRef(ctx, nil, ref, false)
	if err != nil {
		return "", err
	}
	if pid, err := peer.Decode(resolved); err == nil {
		return pid, nil
	}
	// An agent ID: the daemon knows which peer it established it for.
	c, err := f.dial(f.e)
	if err != nil {
		return "", err
	}
	defer c.Close()
	info, err := c.PeerTrust(ctx, resolved)
	if err != nil {
		return "", err
	}
	return peer.Decode(info.Peer)
}
