package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/mail"
)

// Durability. Every message is recorded twice before the daemon acts on
// it: its audit entry, and its ID in the replay seen-set. With
// durability.sync = "always" each record is fsynced on the spot (three
// flushes per message on an ordinary disk: the audit file, and bbolt's
// data and meta pages), which is most of what a warm greeting costs. With
// "interval" (the default) the audit entry is written to the kernel before
// acting, so a crash or kill -9 of the daemon loses none, and the audit
// files are fsynced in batches every durability.interval (gossip.SyncEvery);
// the seen-set keeps its newest IDs in memory only and commits them on the
// same interval (store.BufferedSeen.Flush). After a crash those IDs are
// rebuilt from the audit log (recoverSeen), which recorded each of those
// messages before it was acted on. So a replay is refused across a crash
// exactly as without one; only a power loss can take the last interval.

// commitRecords makes what was recorded so far survive a power loss, for
// the moments the daemon takes responsibility for a message towards
// someone who will then let go of it: the acknowledgement that makes a
// relay delete mail, the 202 of the HTTPS inbox, the acknowledgement of a
// message said in a conversation (node/wire: Acknowledgements). With
// sync = "always" everything already is. Callers reach it through a
// group commit (node/internal/groupsync), so that callers at once share
// one flush.
func (n *Node) commitRecords() error {
	if n.seen == nil {
		return nil
	}
	if err := n.audit.Sync(); err != nil {
		return fmt.Errorf("committing the audit log: %w", err)
	}
	if err := n.seen.Flush(); err != nil {
		return fmt.Errorf("committing the replay seen-set: %w", err)
	}
	return nil
}

// recoverMargin reaches back before the last flush of the seen-set: an ID
// is added a moment before its message is recorded, and clocks can step.
const recoverMargin = time.Minute

// recoverSeen puts back into the seen-set the IDs of messages received
// since its last flush, as the audit log has them. After a clean shutdown
// (the last flush happens at Close) it finds nothing missing.
func (n *Node) recoverSeen() error {
	since, err := n.store.SeenFlushedAt()
	if err != nil || since.IsZero() {
		return err
	}
	var recalled int
	var recallErr error
	err = n.audit.ReceivedSince(since.Add(-recoverMargin), func(e gossip.AuditEntry) {
		if strings.HasPrefix(e.Note, "refused") || recallErr != nil {
			return // never acted on: a redelivery may be accepted
		}
		guard := n.replay
		if e.Transport == mail.ViaMailbox {
			guard = n.mailReplay
		}
		added, err := guard.Recall(e.Peer+" "+e.Message.Headers.MessageID, e.Message.Headers.Date)
		if added {
			recalled++
		}
		recallErr = err
	})
	if err == nil {
		err = recallErr
	}
	if err != nil {
		return fmt.Errorf("rebuilding the replay seen-set from the audit log: %w", err)
	}
	if recalled > 0 {
		n.log.Info("replay seen-set rebuilt from the audit log after an unclean stop", "messages", recalled, "since", since)
	}
	return nil
}

// flushLoop commits the seen-set every durability.interval (the audit log
// syncs itself on the same interval).
func (n *Node) flushLoop() {
	seen := n.seen
	t := time.NewTicker(n.cfg.Durability.Interval.Duration)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return // Close flushes once more, after every handler has returned
		case <-t.C:
			if err := seen.Flush(); err != nil {
				n.log.Warn("committing the replay seen-set", "err", err)
			}
		}
	}
}
