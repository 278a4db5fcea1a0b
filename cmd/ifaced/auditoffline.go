package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
)

// `ifaced audit` reads the audit log through the running daemon, which
// renders every .md first; when no daemon runs for the home, it reads the
// log's files itself (gossip.ReadAuditLog: nothing is written), so a
// stopped daemon's history, and why it decided what it did, can still be
// read. It says so on standard error.

// auditReader is what `ifaced audit` reads: the control API, or the files.
type auditReader interface {
	AuditWhy(ctx context.Context, messageID string) (*api.AuditWhy, error)
	AuditEntries(ctx context.Context, conversationID string) (*api.AuditConversation, error)
	AuditConversations(ctx context.Context, peer string) (*api.AuditList, error)
	peerRef(ctx context.Context, f *flags, ref string) (string, error)
}

// offlineAudit reads the audit log of the command's home from its files.
func (f *flags) offlineAudit(e *env) (auditReader, error) {
	h, err := f.homeDir(e)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(h.Dir, "audit")
	log, err := gossip.ReadAuditLog(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w for %s (start one with \"ifaced run\"), and it holds no audit log (%s) to read", api.ErrNoDaemon, h.Dir, dir)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.stderr, "no ifaced is running for %s: reading its audit log from the files in %s\n", h.Dir, dir)
	return filesAudit{log}, nil
}

// filesAudit answers as the control API does, from the files.
type filesAudit struct{ log *gossip.AuditLog }

func (a filesAudit) AuditWhy(_ context.Context, id string) (*api.AuditWhy, error) {
	en, err := a.log.Decided(id)
	if err != nil {
		return nil, err
	}
	return &api.AuditWhy{MessageID: id, Entry: en, Decision: en.Decision}, nil
}

func (a filesAudit) AuditEntries(_ context.Context, id string) (*api.AuditConversation, error) {
	entries, err := a.log.Entries(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the audit log has no conversation %q", id)
	}
	out := &api.AuditConversation{ConversationID: id, Entries: entries}
	switch {
	case errors.Is(err, gossip.ErrTornAuditLine):
		out.Warning = err.Error()
	case err != nil:
		return nil, err
	}
	if out.Entries == nil {
		out.Entries = []gossip.AuditEntry{}
	}
	if list, _ := a.log.Conversations(); list != nil {
		for _, c := range list {
			if c.ID == id {
				out.File = c.File
			}
		}
	}
	return out, nil
}

func (a filesAudit) AuditConversations(_ context.Context, peer string) (*api.AuditList, error) {
	list, err := a.log.Conversations()
	if err != nil && list == nil {
		return nil, err
	}
	out := &api.AuditList{Conversations: []gossip.AuditConversation{}}
	if err != nil {
		out.Warning = err.Error()
	}
	for _, c := range list {
		if peer == "" || slices.Contains(c.Peers, peer) {
			out.Conversations = append(out.Conversations, c)
		}
	}
	return out, nil
}

// peerRef takes an alias or a peer ID: display names are the running
// daemon's to look up.
func (filesAudit) peerRef(_ context.Context, f *flags, ref string) (string, error) {
	book, err := f.aliases()
	if err != nil {
		return "", err
	}
	if pid, ok, err := book.Lookup(ref); err != nil {
		return "", err
	} else if ok {
		return pid.String(), nil
	}
	return ref, nil
}

// apiAudit is the running daemon's audit, through its control API.
type apiAudit struct{ *api.Client }

func (a apiAudit) peerRef(ctx context.Context, f *flags, ref string) (string, error) {
	return f.peerRef(ctx, a.Client, ref, false)
}
