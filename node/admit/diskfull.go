package admit

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/ifaced/ifaced/node/wire"
)

// A full disk. The door records every message before anything acts on it,
// so when the audit log's disk is full (ENOSPC, or the owner's quota,
// EDQUOT) nothing can be admitted: the message is refused with wire code
// unavailable and a reason that says so, without the file's path (the
// owner's log has that), and the owner is warned once until a message is
// recorded again. Nothing is acted on, so nothing acknowledged is lost.

// ErrDiskFull is the reason a peer is given when the audit log's disk is full.
var ErrDiskFull = errors.New("its disk is full; it records every message before acting on it, so it acted on nothing")

// diskFull is set while recording fails for a full disk (Door.diskFull).
type diskFull struct{ on atomic.Bool }

// isDiskFull reports whether err is the file system saying it has no room.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskFullRefusal returns the refusal a peer is given for err when err is
// the file system saying it has no room (wire code unavailable,
// ErrDiskFull), and err itself otherwise.
func diskFullRefusal(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	return fmt.Errorf("%w (%w): %w", wire.ErrUnavailable, ErrAudit, ErrDiskFull)
}

// recorded turns a full disk's error from recording into the refusal a
// peer is given, warning the owner on the first; a success after it says
// the disk has room again.
func (d *Door) recorded(err error) error {
	if err == nil {
		if d.full.on.Swap(false) {
			d.log.Info("the audit log's disk has room again: messages are recorded and taken")
		}
		return nil
	}
	if !isDiskFull(err) {
		return err
	}
	if !d.full.on.Swap(true) {
		d.log.Warn("the disk holding the audit log is full: every message is refused (wire code unavailable) until there is room; free space on it, nothing needs restarting", "err", err)
	}
	return diskFullRefusal(err)
}

// ErrAnswerUnrecorded is the reason a peer is given when this daemon took
// its message but could not record its answer, the disk being full: a
// greeting's answer (no conversation opens), a capability request's
// result or refusal (the request was decided, and may have run).
var ErrAnswerUnrecorded = errors.New("its disk is full; it records every message before sending it, so it could not send its answer")

// Unrecorded is, for an answer this daemon could not record before
// sending it, what recorded is for a received message: when the disk is
// full, the refusal the peer is given instead (wire code unavailable,
// ErrAnswerUnrecorded), the owner warned once; err itself otherwise. The
// transport sends it unrecorded, so that the peer hears why rather than
// a reset stream or nothing: nothing unrecorded leaves but a refusal, as
// for every refusal on a full disk.
func (d *Door) Unrecorded(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	d.recorded(err)
	return fmt.Errorf("%w (%w): %w", wire.ErrUnavailable, ErrAudit, ErrAnswerUnrecorded)
}

// ErrStoreDiskFull is the reason a peer is given when this daemon could
// not keep in its store what its message needs kept (a known peer's view,
// mail left at a relay), the disk being full.
var ErrStoreDiskFull = errors.New("its disk is full, so it could not store what the message needs kept; it did nothing with it")

// Unstored returns, for a store write that failed because the disk is
// full, the refusal a peer is given (wire code unavailable,
// ErrStoreDiskFull), and err itself otherwise.
func Unstored(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	return fmt.Errorf("%w: %w", wire.ErrUnavailable, ErrStoreDiskFull)
}
