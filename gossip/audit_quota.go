package gossip

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The audit log's room on disk. Without limits (OpenAuditLog with no
// WithLimits) the log grows as before; with them:
//
//   - Quota (AuditLimits.MaxBytes). The log counts the bytes its day
//     directories take: each file's size rounded up to whole 4 KiB blocks,
//     measured once at open (one walk of the day directories) and kept up
//     to date by every append (which knows the file's size before and
//     after), so no write ever scans the log. When the count passes the
//     quota, whole days are deleted, oldest first, until it is back under;
//     the current day (by the log's clock) and later ones are never
//     deleted.
//   - Retention (AuditLimits.Retention). Days older than that are deleted
//     at open and at the first write of each new day. An idle daemon
//     writes nothing, so nothing grows while a day waits for its turn.
//   - When the current day alone is over the quota, refusal summaries go
//     first: RecordRefusal writes nothing (ErrNoRoom; the caller counts the
//     refusal as left out). The record of refusals of one day may also
//     take at most RefusalShare of the quota, so that a flood of refusals
//     pushes out at most that much older history a day. Entries of
//     conversations are still written — the daemon audits before it acts,
//     and a conversation it has admitted goes on — but once the count is
//     over the quota plus Headroom, Room reports ErrNoRoom and the daemon
//     takes no new conversations until days age out or the owner raises
//     audit.max_mb.
//   - Strangers' share (StrangerShare). The files of peers the owner has
//     not made known take at most a quarter of the quota, across the
//     log; a new stranger's conversation makes room by deleting the
//     oldest of them, never a file of a peer the owner made known
//     (audit_strangers.go).
//   - Free-disk watermark (AuditLimits.MinFree). When the file system
//     holding the log has less free space than that (for an unprivileged
//     user: statfs's f_bavail), Room reports ErrNoRoom and refusals are not
//     written; entries of admitted conversations are written while the disk
//     takes them. The free space is asked of the file system (one
//     statfs) at a Room or RecordRefusal call at most every
//     FreeSpaceEvery (a quarter of a second; the calls between use the
//     figure asked last), through a function tests replace
//     (WithFreeSpace), which is asked at every call.
//
// A day deleted while a late entry for it is being written (only by the
// quota, and only for a day before the current one) can make that Record
// fail; the entry's message is then refused as unaudited, as for any
// failure to write.

// ErrNoRoom: the audit log has no room for more than the conversations
// already admitted (its quota is used up, or the disk is nearly full).
// The daemon refuses new conversations with it (wire code unavailable).
var ErrNoRoom = errors.New("no room to record new conversations")

// AuditLimits bounds the audit log on disk. Zero values turn a limit off.
type AuditLimits struct {
	MaxBytes  int64         // the quota of the day directories together
	Retention time.Duration // days older than this are deleted
	MinFree   int64         // free bytes the file system must keep
}

// Headroom is the share of the quota, beyond it, that entries of admitted
// conversations may still take before new conversations are refused.
const Headroom = 4 // MaxBytes/Headroom

// RefusalShare bounds the record of refusals of one day: MaxBytes/RefusalShare.
const RefusalShare = 16

// StrangerShare bounds the strangers' files — the files into which
// entries of peers the owner has not made known went — across the whole
// log: MaxBytes/StrangerShare. Past it, StrangerRoom deletes the oldest
// strangers' files to make room for a new stranger (audit_strangers.go),
// so fresh keys, which cost nothing to make, can neither fill the quota
// nor shut out new strangers, and never take the owner's peers' history.
const StrangerShare = 4

// ErrStrangersShare: the strangers' share of the audit log is used up and
// none of their files could be deleted to make room. It wraps ErrNoRoom.
var ErrStrangersShare = fmt.Errorf("%w for strangers", ErrNoRoom)

// auditBlock is the unit files are counted in.
const auditBlock = 4 << 10

// WithLimits sets the audit log's quota, retention and free-disk
// watermark (see the comment at the top of this file).
func WithLimits(l AuditLimits) AuditOption {
	return func(a *AuditLog) { a.limits = l }
}

// WithFreeSpace replaces how the log asks the free bytes of its file
// system (by default statfs on its directory).
func WithFreeSpace(free func() (uint64, error)) AuditOption {
	return func(a *AuditLog) { a.freeSpace, a.freeNow = free, free }
}

// WithClock sets the clock that says which day is the current one for
// retention and the quota (by default time.Now).
func WithClock(now func() time.Time) AuditOption {
	return func(a *AuditLog) { a.now = now }
}

// usage is the count of bytes the day directories take.
type usage struct {
	mu      sync.Mutex
	days    map[string]int64 // day → bytes
	total   int64
	refused int64  // bytes of the record of refusals of refusedDay
	refDay  string // the day refused counts
	// strangers is the bytes of the strangers' files (strangerFiles, by
	// day + "/" + name), across the log (audit_strangers.go): found again
	// at open from the days' indexes, and kept up to date by every write.
	strangers     int64
	strangerFiles map[string]*strangerFile
	tick          uint64 // orders the strangers' files by their last write
	// The current day's record of pruned files (audit_strangers.go).
	prunedDay      string
	prunedBytes    int64
	prunedUnlisted int
	swept          string // the day retention last ran for
	enforcer       sync.Mutex
}

func roundBlock(n int64) int64 { return (n + auditBlock - 1) / auditBlock * auditBlock }

// measure counts the day directories once, at open.
func (a *AuditLog) measure() error {
	days, err := a.days()
	if err != nil {
		return err
	}
	u := &a.usage
	u.days = map[string]int64{}
	u.strangerFiles = map[string]*strangerFile{}
	for _, day := range days {
		des, err := os.ReadDir(filepath.Join(a.dir, day))
		if err != nil {
			return fmt.Errorf("measuring audit log: %w", err)
		}
		var n int64
		sizes := map[string]int64{} // a peer's file name → its .jsonl and .md
		for _, de := range des {
			info, err := de.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			n += roundBlock(info.Size())
			if ext := filepath.Ext(de.Name()); ext == auditJSONLExt || ext == auditMDExt {
				sizes[strings.TrimSuffix(de.Name(), ext)] += roundBlock(info.Size())
			}
			if de.Name() == refusedName+auditJSONLExt || de.Name() == refusedName+auditMDExt {
				if day > u.refDay {
					u.refDay, u.refused = day, 0
				}
				if day == u.refDay {
					u.refused += roundBlock(info.Size())
				}
			}
		}
		u.days[day] = n
		u.total += n
		a.loadStrangers(day, sizes)
	}
	return nil
}

// account adds what an append of n bytes to a file of size bytes did to
// the count, and enforces the quota or retention when due.
func (a *AuditLog) account(path string, size, n int64) {
	due, prune := a.count(path, size, n)
	a.afterCount(due, prune)
}

// accountQuiet counts an append without enforcing anything: for writes
// made inside the tamper-evident log's own locks (audit_tree.go), which
// enforcing could wait for. The next write enforces.
func (a *AuditLog) accountQuiet(path string, size, n int64) { a.count(path, size, n) }

// count adds an append to the count, and says whether the quota or
// retention is due, and the strangers' files are over their share.
func (a *AuditLog) count(path string, size, n int64) (due, prune bool) {
	if a.usage.days == nil {
		return false, false // no limits
	}
	day := filepath.Base(filepath.Dir(path))
	grown := roundBlock(size+n) - roundBlock(size)
	u := &a.usage
	u.mu.Lock()
	u.days[day] += grown
	u.total += grown
	if base := filepath.Base(path); base == refusedName+auditJSONLExt || base == refusedName+auditMDExt {
		if day != u.refDay {
			u.refDay, u.refused = day, 0
		}
		u.refused += grown
	}
	if sf := u.strangerFiles[day+"/"+strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))]; sf != nil {
		u.tick++
		sf.bytes += grown
		sf.last = u.tick
		u.strangers += grown
		prune = a.limits.MaxBytes > 0 && u.strangers > a.limits.MaxBytes/StrangerShare
	}
	due = a.limits.MaxBytes > 0 && u.total > a.limits.MaxBytes || u.swept != a.currentDay()
	u.mu.Unlock()
	return due, prune
}

// afterCount enforces what count found due.
func (a *AuditLog) afterCount(due, prune bool) {
	if due {
		a.enforce()
	}
	if prune {
		// Conversations admitted together may write past the share before
		// any new one asks for room: strangers' files are pruned as soon
		// as they pass it, in the background (this write may hold the
		// lock of a file the pass waits for).
		a.pruneInBackground()
	}
}

// roomMade runs a pass making room in the strangers' share and reports
// whether it did (makeStrangersRoom), noting when it could not
// (pruneStuck).
func (a *AuditLog) roomMade() bool {
	ok := a.makeStrangersRoom()
	a.pruneStuck.Store(!ok)
	return ok
}

// pruneInBackground starts a pass making room in the strangers' share
// unless one started so is running.
func (a *AuditLog) pruneInBackground() {
	if a.pruning.CompareAndSwap(false, true) {
		go func() {
			defer a.pruning.Store(false)
			a.roomMade()
		}()
	}
}

// today is the current day by the log's clock.
func (a *AuditLog) currentDay() string { return a.now().UTC().Format(auditDayLayout) }

// enforce deletes the days past retention, then the oldest days while the
// count is over the quota. One pass at a time; a write that finds one
// running goes on without waiting.
func (a *AuditLog) enforce() {
	u := &a.usage
	if !u.enforcer.TryLock() {
		return
	}
	defer u.enforcer.Unlock()
	now := a.now().UTC()
	today := now.Format(auditDayLayout)
	cutoff := ""
	if a.limits.Retention > 0 {
		cutoff = now.Add(-a.limits.Retention).Format(auditDayLayout)
	}
	u.mu.Lock()
	u.swept = today
	days := make([]string, 0, len(u.days))
	for d := range u.days {
		days = append(days, d)
	}
	u.mu.Unlock()
	slices.Sort(days)
	for _, day := range days {
		if day >= today {
			break
		}
		u.mu.Lock()
		over := a.limits.MaxBytes > 0 && u.total > a.limits.MaxBytes
		u.mu.Unlock()
		if day >= cutoff && !over {
			break
		}
		if a.proofsOn() {
			// Written down first: a day deleted by policy is told apart
			// from one deleted by hand (audit_tree.go).
			reason := PrunedQuota
			if day < cutoff {
				reason = PrunedRetention
			}
			u.mu.Lock()
			bytes := u.days[day]
			u.mu.Unlock()
			pd := PrunedDay{Day: day, Bytes: bytes}
			if link := a.forgetTree(day); link != nil {
				pd.Size, pd.Root = link.Size, link.Root
			}
			if !a.recordPruned(Pruned{At: now, Reason: reason, Files: []PrunedFile{}, Days: []PrunedDay{pd}, Bytes: bytes}, true) {
				return // tried again at the next write over the quota
			}
		}
		if err := a.removeDay(day); err != nil {
			return // tried again at the next write over the quota
		}
	}
}

// removeDay deletes a day directory and forgets its state.
func (a *AuditLog) removeDay(day string) error {
	var dropped []*auditFile
	a.mu.Lock()
	for k, f := range a.files {
		if f.day == day {
			delete(a.files, k)
			dropped = append(dropped, f)
		}
	}
	for k := range a.names {
		if k[:len(auditDayLayout)] == day {
			delete(a.names, k)
		}
	}
	a.mu.Unlock()
	a.retire(dropped, true, false)
	if a.md != nil { // nil while OpenAuditLog enforces the limits at start
		a.md.dropDay(day)
	}
	if err := os.RemoveAll(filepath.Join(a.dir, day)); err != nil {
		return err
	}
	u := &a.usage
	u.mu.Lock()
	u.total -= u.days[day]
	delete(u.days, day)
	for k, sf := range u.strangerFiles {
		if sf.day == day {
			u.strangers -= sf.bytes
			delete(u.strangerFiles, k)
		}
	}
	u.mu.Unlock()
	return nil
}

// Usage is the bytes the audit log's day directories take (as counted
// for the quota: whole 4 KiB blocks); 0 without limits.
func (a *AuditLog) Usage() int64 {
	a.usage.mu.Lock()
	defer a.usage.mu.Unlock()
	return a.usage.total
}

// StrangersUsage is the bytes the strangers' files take (counted as
// Usage counts), of which MaxBytes/StrangerShare is their share.
func (a *AuditLog) StrangersUsage() int64 {
	a.usage.mu.Lock()
	defer a.usage.mu.Unlock()
	return a.usage.strangers
}

// Room says whether the log has room for new conversations: nil, or an
// error wrapping ErrNoRoom that says which limit is reached.
func (a *AuditLog) Room() error {
	if max := a.limits.MaxBytes; max > 0 {
		u := &a.usage
		u.mu.Lock()
		total := u.total
		u.mu.Unlock()
		if total > max+max/Headroom {
			return fmt.Errorf("%w: the audit log takes %d MiB, over its quota of %d MiB (audit.max_mb) with today's entries alone",
				ErrNoRoom, total>>20, max>>20)
		}
	}
	return a.diskRoom()
}

// StrangerSlack is how far past their share, MaxBytes/StrangerShare, the
// strangers' files may be while a pass deletes the oldest of them, before
// a new stranger waits for the pass: share/StrangerSlack.
const StrangerSlack = 8

// StrangerRoom says whether the log has room for a new conversation with
// a stranger: Room, once the strangers' files are within
// MaxBytes/StrangerShare — when they are not, the oldest of them are
// deleted first (audit_strangers.go); an error wrapping ErrStrangersShare
// only when none could be. A pass deleting thousands of files takes
// seconds (unlinking is the most of it), so a new stranger does not wait
// for one while the strangers' files are within share/StrangerSlack past
// their share: the pass runs in the background and the stranger is
// taken. Past that it waits (a 38-minute soak had two greetings held
// 30 s by passes; docs/soak.md), and so does every stranger once the
// last pass could make no room (pruneStuck: nothing listed could go, or
// the day's record of pruning is full), so that the slack is only ever
// taken while the oldest files are being deleted.
// The count is of what is written: renderings still queued for the .md
// writer (audit_writer.go) land after the stranger was taken, and may
// take the strangers' files past the slack by about as much again as the
// .jsonl they render (at most the writer's queue, mdQueueBytes/
// mdEntryFactor), until the pass their count starts has run.
func (a *AuditLog) StrangerRoom() error {
	if max := a.limits.MaxBytes; max > 0 {
		u := &a.usage
		u.mu.Lock()
		used := u.strangers
		u.mu.Unlock()
		share := max / StrangerShare
		if used > share && used <= share+share/StrangerSlack && !a.pruneStuck.Load() {
			a.pruneInBackground()
			return a.Room()
		}
		if used > share && !a.roomMade() {
			u.mu.Lock()
			used = u.strangers
			u.mu.Unlock()
			return fmt.Errorf("%w: the files of peers the owner has not made known take %d MiB, their share of audit.max_mb (%d MiB) is a %s, and none of them could be deleted to make room; new conversations with strangers are taken again once there is room, or as soon as the owner makes the peer known",
				ErrStrangersShare, used>>20, max>>20, shareName(StrangerShare))
		}
	}
	return a.Room()
}

func shareName(n int) string {
	switch n {
	case 2:
		return "half"
	case 4:
		return "quarter"
	}
	return fmt.Sprintf("1/%d", n)
}

// diskRoom checks the free-disk watermark.
func (a *AuditLog) diskRoom() error {
	if a.limits.MinFree <= 0 || a.freeSpace == nil {
		return nil
	}
	free, err := a.freeSpace()
	if err != nil {
		return nil // a file system that cannot say: the writes will tell
	}
	if free < uint64(a.limits.MinFree) {
		return fmt.Errorf("%w: the disk holding the audit log has %d MiB free, below audit.min_free_mb (%d MiB)",
			ErrNoRoom, free>>20, a.limits.MinFree>>20)
	}
	return nil
}

// refusalRoom says whether a refusal summary that grows the day's record
// of refusals by at most grow bytes (whole blocks) may be written now.
func (a *AuditLog) refusalRoom(day string, grow int64) error {
	if max := a.limits.MaxBytes; max > 0 {
		u := &a.usage
		u.mu.Lock()
		total, refused := u.total, u.refused
		if u.refDay != day {
			refused = 0
		}
		u.mu.Unlock()
		if total > max {
			return fmt.Errorf("%w: the audit log is over its quota of %d MiB (audit.max_mb) with today's entries alone; refusals are counted, not written",
				ErrNoRoom, max>>20)
		}
		if refused+grow > max/RefusalShare {
			return fmt.Errorf("%w: today's record of refusals has its share of the quota (%d MiB of %d MiB); refusals are counted, not written",
				ErrNoRoom, refused>>20, max>>20)
		}
	}
	return a.diskRoom()
}
