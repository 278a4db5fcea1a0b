package gossip

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/ifaced/ifaced/identity"
)

// Evidence bundles (docs/audit.md): records of the tamper-evident log
// with what proves them, in one JSON file that verifies with nothing
// else — no home, no network. A bundle holds the records (each the line
// the log wrote, so each message as the side that sent it signed it),
// each record's inclusion proof, the checkpoints the proofs lead to, and
// the did:keys of the daemon that signed the checkpoints and its own
// messages.
//
// A conversation's bundle (ExportBundle with a conversation ID) holds
// every record of it, the owner's decisions included: it is the owner's
// evidence, for the other side's owner or an arbiter. A receipt (Receipt)
// holds one message a peer sent and nothing else — no other peer's
// message, no decision, and of the rest of the log only hashes — so it
// can be handed to that peer: the owner exports it (`ifaced audit export
// --message ID`, or GET /v1/audit/receipt/{message_id} on the control
// API); peers do not ask for receipts on the wire.

// BundleFormat is the format member of every bundle.
const BundleFormat = "ifaced-audit-bundle/1"

// MaxBundleSize bounds a bundle VerifyBundle reads.
const MaxBundleSize = 256 << 20

// Bundle is an evidence bundle.
type Bundle struct {
	Format         string         `json:"format"`
	Keys           []string       `json:"keys"` // the daemon's did:keys that signed its checkpoints and messages
	ConversationID string         `json:"conversation_id,omitempty"`
	MessageID      string         `json:"message_id,omitempty"`
	Checkpoints    []string       `json:"checkpoints"` // signed notes
	Records        []BundleRecord `json:"records"`
}

// File is the bundle as a file: indented JSON and a newline, as `ifaced
// audit export` writes it and the console offers it for download.
func (b *Bundle) File() ([]byte, error) {
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the bundle: %w", err)
	}
	return append(raw, '\n'), nil
}

// BundleRecord is one record with its inclusion proof.
type BundleRecord struct {
	Checkpoint int      `json:"checkpoint"` // index in Checkpoints
	Leaf       int64    `json:"leaf"`       // the record's leaf index in that checkpoint's tree
	Proof      []string `json:"proof"`      // the inclusion proof (RFC 9162 §2.1.3), leaf to root, standard base64
	Record     string   `json:"record"`     // the record: the line the log wrote, without its newline
}

// ErrNotCheckpointed: a record asked for is not in a signed checkpoint
// yet (the daemon signs one within CheckpointEvery).
var ErrNotCheckpointed = errors.New("recorded after the newest checkpoint")

// ErrNoProofs: the records asked for are in days the log was not
// tamper-evident yet, or their trees are gone.
var ErrNoProofs = errors.New("no tamper-evident log holds it")

// BundleSelect says what a bundle holds: a conversation's records, or one
// message's.
type BundleSelect struct {
	ConversationID string
	MessageID      string
}

// foundRecord is a record found for a bundle.
type foundRecord struct {
	day, file string
	off       int64
	line      []byte
	e         AuditEntry
}

// ExportBundle makes the bundle of sel from the audit log in dir, whose
// checkpoints must be signed by a key trusted says yes to. It reads only;
// a daemon may be running. A record not yet in a checkpoint is an error
// wrapping ErrNotCheckpointed.
func ExportBundle(dir string, sel BundleSelect, trusted func(did string) bool) (*Bundle, error) {
	if (sel.ConversationID == "") == (sel.MessageID == "") {
		return nil, errors.New("exporting a bundle: give a conversation ID or a message ID")
	}
	found, err := findRecords(dir, sel)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Format: BundleFormat, Keys: []string{}, ConversationID: sel.ConversationID, MessageID: sel.MessageID,
		Checkpoints: []string{}, Records: []BundleRecord{}}
	byDay := map[string][]int{}
	var days []string
	for i, f := range found {
		if _, ok := byDay[f.day]; !ok {
			days = append(days, f.day)
		}
		byDay[f.day] = append(byDay[f.day], i)
	}
	leaves := make([]int64, len(found))
	cpOf := make([]int, len(found))
	readers := map[string]*auditproof.Reader{}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	sizes := map[string]int64{}
	for _, day := range days {
		r, err := auditproof.OpenReader(filepath.Join(dir, day))
		if errors.Is(err, auditproof.ErrNoTree) {
			return nil, fmt.Errorf("exporting a bundle: the records of %s: %w (that day was recorded before the log was tamper-evident)", day, ErrNoProofs)
		}
		if err != nil {
			return nil, err
		}
		readers[day] = r
		note, c, signer, err := newestCheckpoint(filepath.Join(dir, day), trusted)
		if err != nil {
			return nil, fmt.Errorf("exporting a bundle: %s: %w", day, err)
		}
		if !slices.Contains(b.Keys, signer) {
			b.Keys = append(b.Keys, signer)
		}
		sizes[day] = c.Size
		idx := len(b.Checkpoints)
		b.Checkpoints = append(b.Checkpoints, note)
		if err := findLeaves(r, found, byDay[day], leaves); err != nil {
			return nil, err
		}
		for _, i := range byDay[day] {
			cpOf[i] = idx
			if leaves[i] >= c.Size {
				return nil, fmt.Errorf("exporting a bundle: message %q of %s is leaf %d, and the newest checkpoint of that day covers %d leaves: %w; the daemon signs one every %s while it runs (try again)",
					found[i].e.Message.Headers.MessageID, day, leaves[i], c.Size, ErrNotCheckpointed, CheckpointEvery)
			}
		}
	}
	for i, f := range found {
		p, err := readers[f.day].Prove(leaves[i], sizes[f.day])
		if err != nil {
			return nil, fmt.Errorf("exporting a bundle: %w", err)
		}
		proof := make([]string, len(p))
		for k, h := range p {
			proof[k] = base64.StdEncoding.EncodeToString(h[:])
		}
		b.Records = append(b.Records, BundleRecord{Checkpoint: cpOf[i], Leaf: leaves[i], Proof: proof, Record: string(f.line)})
		if f.e.Direction == Sent {
			for _, k := range signaturesOf(f.e.Message) {
				did, _, _ := strings.Cut(k, "#")
				if trusted(did) && !slices.Contains(b.Keys, did) {
					b.Keys = append(b.Keys, did)
				}
			}
		}
	}
	return b, nil
}

// newestCheckpoint is the last checkpoint of a day's tree that verifies.
func newestCheckpoint(dayDir string, trusted func(string) bool) (string, auditproof.Checkpoint, string, error) {
	raw, err := os.ReadFile(filepath.Join(dayDir, auditproof.CheckpointsFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", auditproof.Checkpoint{}, "", err
	}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte{'\n'})
	for i := len(lines) - 1; i >= 0; i-- {
		var note string
		if json.Unmarshal(lines[i], &note) != nil {
			continue
		}
		c, signer, err := auditproof.Open([]byte(note), trusted)
		if err != nil {
			return "", auditproof.Checkpoint{}, "", fmt.Errorf("its newest checkpoint does not verify: %w", err)
		}
		if c.Origin != auditproof.Origin(filepath.Base(dayDir)) {
			return "", auditproof.Checkpoint{}, "", fmt.Errorf("its newest checkpoint is of %q", c.Origin)
		}
		return note, c, signer, nil
	}
	return "", auditproof.Checkpoint{}, "", fmt.Errorf("no checkpoint signed yet: %w", ErrNotCheckpointed)
}

// findRecords finds the records a bundle holds, in recorded order.
func findRecords(dir string, sel BundleSelect) ([]foundRecord, error) {
	days, err := listDays(dir)
	if err != nil {
		return nil, err
	}
	id := sel.ConversationID
	if id == "" {
		id = sel.MessageID
	}
	quoted, err := encodeLine(id)
	if err != nil {
		return nil, err
	}
	quoted = bytes.TrimSuffix(quoted, []byte{'\n'})
	if from, ok := ulidDay(id); ok {
		i, _ := slices.BinarySearch(days, dayBefore(from))
		days = days[i:]
	}
	var out []foundRecord
	for _, day := range days {
		paths, err := filepath.Glob(filepath.Join(dir, day, "*"+auditJSONLExt))
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			name := strings.TrimSuffix(filepath.Base(path), auditJSONLExt)
			if strings.HasPrefix(name, "_") {
				continue
			}
			err := scanLines(path, func(off int64, line []byte) bool {
				if !bytes.Contains(line, quoted) {
					return true
				}
				var e AuditEntry
				if json.Unmarshal(line, &e) != nil || e.Message == nil {
					return true
				}
				h := &e.Message.Headers
				if sel.ConversationID != "" && h.ConversationID == sel.ConversationID || sel.MessageID != "" && h.MessageID == sel.MessageID {
					out = append(out, foundRecord{day: day, file: name, off: off, line: slices.Clone(line), e: e})
					return sel.MessageID == ""
				}
				return true
			})
			if err != nil {
				return nil, err
			}
			if sel.MessageID != "" && len(out) > 0 {
				return out, nil
			}
		}
	}
	if len(out) == 0 {
		what := "conversation"
		if sel.ConversationID == "" {
			what = "message"
		}
		return nil, fmt.Errorf("exporting a bundle: the audit log has no %s %q: %w", what, id, fs.ErrNotExist)
	}
	slices.SortStableFunc(out, func(x, y foundRecord) int { return x.e.At.Compare(y.e.At) })
	return out, nil
}

// scanLines calls fn with the offset and bytes (without the newline) of
// each line of a file until fn returns false.
func scanLines(path string, fn func(off int64, line []byte) bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if !fn(off, bytes.TrimSuffix(line, []byte{'\n'})) {
				return nil
			}
			off += int64(len(line))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// findLeaves finds the leaves of the records which (of a day) by their
// file and offset, in one pass over the day's leaves.
func findLeaves(r *auditproof.Reader, found []foundRecord, which []int, out []int64) error {
	cur := auditproof.Current(r.Names())
	want := map[[2]int64]int{}
	for _, i := range which {
		num, ok := cur[found[i].file]
		if !ok {
			return fmt.Errorf("exporting a bundle: %s/%s is in no leaf of its day's tree", found[i].day, found[i].file)
		}
		want[[2]int64{int64(num), found[i].off}] = i
	}
	left := len(want)
	for n := int64(0); n < r.Size() && left > 0; n++ {
		l, err := r.Leaf(n)
		if err != nil {
			return err
		}
		if i, ok := want[[2]int64{int64(l.File), l.Offset}]; ok {
			out[i] = n
			delete(want, [2]int64{int64(l.File), l.Offset})
			left--
		}
	}
	for _, i := range want {
		return fmt.Errorf("exporting a bundle: message %q of %s is in no leaf yet: %w (try again in %s)",
			found[i].e.Message.Headers.MessageID, found[i].day, ErrNotCheckpointed, CheckpointEvery)
	}
	return nil
}

// BundleReport is what VerifyBundle found.
type BundleReport struct {
	Keys           []string           `json:"keys"`
	ConversationID string             `json:"conversation_id,omitempty"`
	MessageID      string             `json:"message_id,omitempty"`
	Checkpoints    []BundleCheckpoint `json:"checkpoints"`
	Records        []BundleEntry      `json:"records"`
	Failure        *BundleFailure     `json:"failure,omitempty"`
}

// BundleCheckpoint is a checkpoint of a bundle, verified.
type BundleCheckpoint struct {
	Origin string    `json:"origin"`
	Size   int64     `json:"size"`
	Root   string    `json:"root"`
	Time   time.Time `json:"time"`
	Signer string    `json:"signer"`
}

// BundleEntry is a record of a bundle, verified.
type BundleEntry struct {
	At        time.Time `json:"at"`
	Direction Direction `json:"direction"`
	Peer      string    `json:"peer"`
	MessageID string    `json:"message_id"`
	Phase     Phase     `json:"phase"`
	Leaf      int64     `json:"leaf"`
	Origin    string    `json:"origin"`
	Signature string    `json:"signature"` // whose signature verified on the message: "peer", "daemon", or why none
	Decision  bool      `json:"decision,omitempty"`
}

// BundleFailure is the first part of a bundle that does not verify.
type BundleFailure struct {
	Part string `json:"part"` // "bundle", "checkpoint 0", "record 3", …
	What string `json:"what"`
}

func (f *BundleFailure) Error() string { return f.Part + ": " + f.What }
func (f *BundleFailure) Unwrap() error { return ErrBundleInvalid }

// ErrBundleInvalid: a bundle does not verify. A *BundleFailure says where.
var ErrBundleInvalid = errors.New("the evidence bundle does not verify")

// VerifyBundle verifies a bundle with nothing else. pinned, when not nil,
// says which did:keys the person verifying knows as the daemon's: every
// checkpoint must then be signed by one of them (otherwise by a key the
// bundle lists, which the report names for them to compare). A bundle
// that does not verify is a report with Failure set and an error wrapping
// ErrBundleInvalid.
func VerifyBundle(raw []byte, pinned func(did string) bool) (*BundleReport, error) {
	rep := &BundleReport{Checkpoints: []BundleCheckpoint{}, Records: []BundleEntry{}}
	err := verifyBundle(raw, pinned, rep)
	var f *BundleFailure
	if errors.As(err, &f) {
		rep.Failure = f
	}
	return rep, err
}

func verifyBundle(raw []byte, pinned func(string) bool, rep *BundleReport) error {
	fail := func(part, format string, args ...any) error {
		return &BundleFailure{Part: part, What: fmt.Sprintf(format, args...)}
	}
	if len(raw) > MaxBundleSize {
		return fail("bundle", "%d bytes, over the %d MiB a bundle may take", len(raw), MaxBundleSize>>20)
	}
	var b Bundle
	if err := jsonv1.Unmarshal(raw, &b); err != nil {
		return fail("bundle", "is not a bundle's JSON: %v", err)
	}
	if b.Format != BundleFormat {
		return fail("bundle", "format %q, want %q", b.Format, BundleFormat)
	}
	if (b.ConversationID == "") == (b.MessageID == "") {
		return fail("bundle", "names neither a conversation_id nor a message_id (exactly one)")
	}
	rep.ConversationID, rep.MessageID, rep.Keys = b.ConversationID, b.MessageID, b.Keys
	keys := map[string]bool{}
	for _, k := range b.Keys {
		if _, err := identity.PublicKeyFromDID(k); err != nil {
			return fail("bundle", "keys: %q is not a did:key: %v", k, err)
		}
		keys[k] = true
	}
	trusted := func(d string) bool { return keys[d] && (pinned == nil || pinned(d)) }
	cps := make([]auditproof.Checkpoint, len(b.Checkpoints))
	for i, note := range b.Checkpoints {
		c, signer, err := auditproof.Open([]byte(note), trusted)
		part := fmt.Sprintf("checkpoint %d", i)
		switch {
		case errors.Is(err, auditproof.ErrUntrustedSigner) && pinned != nil:
			return fail(part, "is signed by %s, not by a key you named: it is not this daemon's, or it was re-signed", strings.Join(auditproof.Signers([]byte(note)), ", "))
		case errors.Is(err, auditproof.ErrUntrustedSigner):
			return fail(part, "is signed by %s, which is not among the bundle's keys: it was re-signed by another key", strings.Join(auditproof.Signers([]byte(note)), ", "))
		case err != nil:
			return fail(part, "%v", err)
		}
		if auditproof.DayOf(c.Origin) == "" {
			return fail(part, "origin %q is not an ifaced audit log's day", c.Origin)
		}
		cps[i] = c
		rep.Checkpoints = append(rep.Checkpoints, BundleCheckpoint{Origin: c.Origin, Size: c.Size, Root: base64.StdEncoding.EncodeToString(c.Root[:]), Time: c.Time, Signer: signer})
	}
	if len(b.Records) == 0 {
		return fail("bundle", "holds no record")
	}
	seen := map[[2]int64]bool{}
	for i, r := range b.Records {
		part := fmt.Sprintf("record %d", i)
		if r.Checkpoint < 0 || r.Checkpoint >= len(cps) {
			return fail(part, "names checkpoint %d; the bundle has %d", r.Checkpoint, len(cps))
		}
		c := cps[r.Checkpoint]
		if r.Leaf < 0 || r.Leaf >= c.Size {
			return fail(part, "is leaf %d of a tree of %d", r.Leaf, c.Size)
		}
		if seen[[2]int64{int64(r.Checkpoint), r.Leaf}] {
			return fail(part, "is leaf %d of %s a second time", r.Leaf, c.Origin)
		}
		seen[[2]int64{int64(r.Checkpoint), r.Leaf}] = true
		proof := make([]auditproof.Hash, len(r.Proof))
		for k, p := range r.Proof {
			h, err := base64.StdEncoding.Strict().DecodeString(p)
			if err != nil || len(h) != auditproof.HashSize {
				return fail(part, "proof hash %d is not 32 bytes in standard base64", k)
			}
			copy(proof[k][:], h)
		}
		if err := auditproof.CheckInclusion(proof, c.Size, c.Root, r.Leaf, auditproof.LeafHash([]byte(r.Record))); err != nil {
			return fail(part, "its inclusion proof does not lead from the record to the root of %s at %d leaves: the record was changed, or is not in that log", c.Origin, c.Size)
		}
		var e AuditEntry
		if err := json.Unmarshal([]byte(r.Record), &e); err != nil || e.Message == nil {
			return fail(part, "is not an audit entry with a message")
		}
		h := &e.Message.Headers
		if day := e.At.UTC().Format(auditDayLayout); day != auditproof.DayOf(c.Origin) {
			return fail(part, "says it was recorded on %s, and its checkpoint is of %s", day, auditproof.DayOf(c.Origin))
		}
		if b.ConversationID != "" && h.ConversationID != b.ConversationID {
			return fail(part, "message %q belongs to conversation %q, not to %q, the bundle's: it came from another conversation", Clip(h.MessageID, 100), Clip(h.ConversationID, 100), b.ConversationID)
		}
		if b.MessageID != "" && h.MessageID != b.MessageID {
			return fail(part, "is message %q, not %q, the bundle's", Clip(h.MessageID, 100), b.MessageID)
		}
		ent := BundleEntry{At: e.At, Direction: e.Direction, Peer: e.Peer, MessageID: h.MessageID, Phase: h.Phase, Leaf: r.Leaf, Origin: c.Origin, Decision: e.Decision != nil}
		switch e.Direction {
		case Received:
			switch err := verifyReceived(&e); {
			case err == nil:
				ent.Signature = "peer"
			case errors.Is(err, ErrUnsigned):
				ent.Signature = "unsigned (as received)"
			case errors.Is(err, errKeyUnknown):
				ent.Signature = "the sender's key cannot be known offline"
			default:
				return fail(part, "the sender's signature on message %q does not verify: %v", Clip(h.MessageID, 100), err)
			}
		case Sent:
			if len(signaturesOf(e.Message)) == 0 {
				ent.Signature = "unsigned (as sent)"
				break
			}
			ok := false
			for _, k := range b.Keys {
				pub, _ := identity.PublicKeyFromDID(k)
				if e.Message.Verify(pub) == nil {
					ok = true
					break
				}
			}
			if !ok {
				return fail(part, "message %q, sent by the daemon, is not signed by any of its keys (%s)", Clip(h.MessageID, 100), strings.Join(b.Keys, ", "))
			}
			ent.Signature = "daemon"
		default:
			return fail(part, "direction %q is neither sent nor received", e.Direction)
		}
		rep.Records = append(rep.Records, ent)
	}
	return nil
}

// WithFormerKeys names the daemon's earlier keys (did:keys), whose
// checkpoints the log's own exports and verifications accept beside the
// signer's.
func WithFormerKeys(dids ...string) AuditOption {
	return func(a *AuditLog) { a.former = append(a.former, dids...) }
}

// trusted says whether a did:key is the signer's or a former key.
func (a *AuditLog) trusted(did string) bool {
	return a.signer != nil && did == a.signer.DID() || slices.Contains(a.former, did)
}

// Bundle signs a checkpoint of what was recorded so far, then exports the
// bundle of sel (ExportBundle).
func (a *AuditLog) Bundle(sel BundleSelect) (*Bundle, error) {
	if !a.proofsOn() {
		return nil, fmt.Errorf("exporting a bundle: %w (the log is not tamper-evident)", ErrNoProofs)
	}
	if err := a.Checkpoint(); err != nil {
		return nil, err
	}
	return ExportBundle(a.dir, sel, a.trusted)
}

// ErrNotAReceipt: a receipt was asked for a message no peer sent to this
// daemon.
var ErrNotAReceipt = errors.New("a receipt is for a message a peer sent")

// Receipt is the bundle of one message a peer sent this daemon (a
// received entry): what the owner hands to that peer as proof the message
// was recorded. It holds nothing of other peers, nor any decision.
func (a *AuditLog) Receipt(messageID string) (*Bundle, error) {
	b, err := a.Bundle(BundleSelect{MessageID: messageID})
	if err != nil {
		return nil, err
	}
	var e AuditEntry
	if err := json.Unmarshal([]byte(b.Records[0].Record), &e); err != nil {
		return nil, err
	}
	if e.Direction != Received || e.Decision != nil {
		return nil, fmt.Errorf("%w: message %q was sent by this daemon (export it as the owner's bundle, which may hold the owner's decision, with `ifaced audit export --message`)", ErrNotAReceipt, messageID)
	}
	return b, nil
}

// ProofState is how a conversation's or a message's records stand in the
// tamper-evident log, for the console.
type ProofState struct {
	State  string `json:"state"`  // ProofVerified, ProofPending, ProofUntracked or ProofFailed
	Detail string `json:"detail"` // in words
	// What verified, when it did: the records, and the checkpoints (their
	// trees' origins, sizes and times) they are included in.
	Records     int                `json:"records,omitempty"`
	Checkpoints []BundleCheckpoint `json:"checkpoints,omitempty"`
	// The record's place, for one message (the why page): its leaf and
	// the checkpoint that includes it.
	Leaf   *int64 `json:"leaf,omitempty"`
	Origin string `json:"origin,omitempty"`
}

// The states of a ProofState.
const (
	ProofVerified  = "verified"  // every record is included in a checkpoint signed by this daemon, and verifies
	ProofPending   = "pending"   // recorded after the newest checkpoint: verifiable within CheckpointEvery
	ProofUntracked = "untracked" // recorded before the log was tamper-evident (or its tree is gone)
	ProofFailed    = "failed"    // does not verify: the detail says what
)

// Proof exports the bundle of sel and verifies it as a third party would:
// the state the console shows for a conversation, and for one message
// (the decision on the why page) with its leaf and checkpoint. Records
// the log does not hold are an error wrapping fs.ErrNotExist.
func (a *AuditLog) Proof(sel BundleSelect) (*ProofState, error) {
	b, err := a.Bundle(sel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case errors.Is(err, ErrNotCheckpointed):
		return &ProofState{State: ProofPending, Detail: err.Error()}, nil
	case errors.Is(err, ErrNoProofs):
		return &ProofState{State: ProofUntracked, Detail: err.Error()}, nil
	case err != nil:
		return &ProofState{State: ProofFailed, Detail: err.Error()}, nil
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	rep, err := VerifyBundle(raw, a.trusted)
	if err != nil {
		return &ProofState{State: ProofFailed, Detail: err.Error()}, nil
	}
	ps := &ProofState{State: ProofVerified, Records: len(rep.Records), Checkpoints: rep.Checkpoints,
		Detail: fmt.Sprintf("%d records, each included in a checkpoint signed by %s", len(rep.Records), strings.Join(rep.Keys, ", "))}
	if sel.MessageID != "" && len(rep.Records) == 1 {
		leaf := rep.Records[0].Leaf
		ps.Leaf, ps.Origin = &leaf, rep.Records[0].Origin
	}
	return ps, nil
}
