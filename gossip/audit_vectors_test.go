package gossip

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip/auditproof"
)

// auditVectors is testdata/audit-vectors.json (docs/audit.md).
type auditVectors struct {
	About string `json:"about"`
	Key   struct {
		Seed    string `json:"seed"`     // hex: the Ed25519 seed of the daemon's key
		DID     string `json:"did"`      // its did:key, the checkpoints' key name
		KeyHash string `json:"key_hash"` // hex: the note key hash
	} `json:"key"`
	Leaves []struct {
		Record   string `json:"record"`    // the leaf data: a record's line
		LeafHash string `json:"leaf_hash"` // hex: SHA-256(0x00 || record)
	} `json:"leaves"`
	Roots []struct {
		Size int64  `json:"size"`
		Root string `json:"root"` // base64: the Merkle Tree Hash of the first size leaves
	} `json:"roots"`
	Inclusion []struct {
		Leaf  int64    `json:"leaf"`
		Size  int64    `json:"size"`
		Proof []string `json:"proof"`
	} `json:"inclusion"`
	Checkpoint struct {
		Text   string `json:"text"`   // the note text
		Signed string `json:"signed"` // the signed note
	} `json:"checkpoint"`
	Bundle json.RawMessage `json:"bundle"` // a conversation's bundle, which verifies
}

const auditVectorsFile = "testdata/audit-vectors.json"

// vectorLog is a log made from fixed keys and a fixed clock: every byte
// of it is the same on every run.
func vectorLog(t *testing.T) *provenLog {
	t.Helper()
	p := &provenLog{dir: t.TempDir(), owner: testIdentity(t, 1), peer: testIdentity(t, 2), conv: auditConvID}
	a := p.open(t)
	p.record(t, a, 1, 4)
	if err := a.RecordRefusal(Refusal{At: testNow, Transport: "libp2p", Peer: "12D3KooWStranger", Code: "bad_signature", Reason: "signature does not verify"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuditVectors: the conformance vectors are what the code makes from
// fixed keys and a fixed clock (-update writes them anew).
func TestAuditVectors(t *testing.T) {
	p := vectorLog(t)
	var v auditVectors
	v.About = "Conformance vectors of ifaced's tamper-evident audit log (docs/audit.md): leaves, tree roots, inclusion proofs, a signed checkpoint and a bundle, from the fixed key below and a fixed clock."
	seed := bytes.Repeat([]byte{1}, 32)
	v.Key.Seed, v.Key.DID = hex.EncodeToString(seed), p.owner.DID()
	kh, err := auditproof.KeyHash(p.owner.DID(), p.owner.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	v.Key.KeyHash = fmt.Sprintf("%08x", kh)
	r, err := auditproof.OpenReader(filepath.Join(p.dir, testDay))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range r.Size() {
		l, err := r.Leaf(i)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(p.dir, testDay, r.Names()[l.File]+auditJSONLExt))
		if err != nil {
			t.Fatal(err)
		}
		rec := b[l.Offset : l.Offset+int64(l.Length)]
		h := auditproof.LeafHash(rec)
		v.Leaves = append(v.Leaves, struct {
			Record   string `json:"record"`
			LeafHash string `json:"leaf_hash"`
		}{string(rec), hex.EncodeToString(h[:])})
		root, err := r.TreeHash(i + 1)
		if err != nil {
			t.Fatal(err)
		}
		v.Roots = append(v.Roots, struct {
			Size int64  `json:"size"`
			Root string `json:"root"`
		}{i + 1, base64.StdEncoding.EncodeToString(root[:])})
	}
	for _, c := range [][2]int64{{0, 1}, {2, 5}, {3, r.Size()}, {r.Size() - 1, r.Size()}} {
		proof, err := r.Prove(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		ps := []string{}
		for _, h := range proof {
			ps = append(ps, base64.StdEncoding.EncodeToString(h[:]))
		}
		v.Inclusion = append(v.Inclusion, struct {
			Leaf  int64    `json:"leaf"`
			Size  int64    `json:"size"`
			Proof []string `json:"proof"`
		}{c[0], c[1], ps})
	}
	note, c, _, err := newestCheckpoint(filepath.Join(p.dir, testDay), p.trusted)
	if err != nil {
		t.Fatal(err)
	}
	v.Checkpoint.Text, v.Checkpoint.Signed = c.Text(), note
	v.Bundle = p.exportBundle(t, BundleSelect{ConversationID: p.conv})
	got, err := json.MarshalIndent(&v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(auditVectorsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(auditVectorsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the code makes now; if the format changed on purpose, run with -update and say so in docs/audit.md", auditVectorsFile)
	}
	if _, err := VerifyBundle(v.Bundle, p.trusted); err != nil {
		t.Fatalf("the vectors' bundle: %v", err)
	}
}

// TestBundleByTheDocument verifies the vectors with a verifier written
// from docs/audit.md alone: none of the Go types or packages of the log,
// no tlog or note; SHA-256, Ed25519, base64 and base58 only. It checks
// the leaves, the roots (by RFC 9162's MTH), the inclusion proofs (by RFC
// 9162's algorithm), the checkpoint's note and signature, and the bundle:
// each checkpoint, each record's proof, and that each record belongs to
// the bundle's conversation — and that a record of another conversation,
// or a changed one, is refused. (Messages' own signatures are the identity
// package's format, pinned by identity/testdata/vectors.json.)
func TestBundleByTheDocument(t *testing.T) {
	raw, err := os.ReadFile(auditVectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	leafHash := func(b []byte) []byte { h := sha256.Sum256(append([]byte{0}, b...)); return h[:] }
	node := func(l, r []byte) []byte {
		h := sha256.Sum256(append(append([]byte{1}, l...), r...))
		return h[:]
	}
	var hashes [][]byte
	for i, l := range v["leaves"].([]any) {
		l := l.(map[string]any)
		h := leafHash([]byte(l["record"].(string)))
		if hex.EncodeToString(h) != l["leaf_hash"] {
			t.Fatalf("leaf %d: hash %x, vectors say %s", i, h, l["leaf_hash"])
		}
		hashes = append(hashes, h)
	}
	var mth func(d [][]byte) []byte
	mth = func(d [][]byte) []byte {
		if len(d) == 1 {
			return d[0]
		}
		k := 1
		for k*2 < len(d) {
			k *= 2
		}
		return node(mth(d[:k]), mth(d[k:]))
	}
	for _, r := range v["roots"].([]any) {
		r := r.(map[string]any)
		n := int(r["size"].(float64))
		if got := base64.StdEncoding.EncodeToString(mth(hashes[:n])); got != r["root"] {
			t.Fatalf("root of %d leaves: %s, vectors say %s", n, got, r["root"])
		}
	}
	b64 := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, in := range v["inclusion"].([]any) {
		in := in.(map[string]any)
		m, n := int64(in["leaf"].(float64)), int64(in["size"].(float64))
		var proof [][]byte
		for _, p := range in["proof"].([]any) {
			proof = append(proof, b64(p.(string)))
		}
		if err := docInclusion(proof, m, n, hashes[m], mth(hashes[:n])); err != nil {
			t.Fatalf("inclusion of leaf %d in %d: %v", m, n, err)
		}
	}
	cp := v["checkpoint"].(map[string]any)
	did := v["key"].(map[string]any)["did"].(string)
	text, err := docOpenNote(cp["signed"].(string), []string{did})
	if err != nil || text != cp["text"] {
		t.Fatalf("the checkpoint: %q, %v", text, err)
	}

	bundle := v["bundle"].(map[string]any)
	if err := docVerifyBundle(bundle); err != nil {
		t.Fatalf("the bundle, by the document: %v", err)
	}
	// Changed, it is refused: a record of another conversation, a record
	// edited, a checkpoint signed by a key the bundle does not list.
	recs := bundle["records"].([]any)
	first := recs[0].(map[string]any)
	orig := first["record"].(string)
	first["record"] = strings.Replace(orig, auditConvID, "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF", 1)
	if err := docVerifyBundle(bundle); err == nil {
		t.Error("a record of another conversation verified")
	}
	first["record"] = strings.Replace(orig, "Message 1", "Message 2", 1)
	if err := docVerifyBundle(bundle); err == nil {
		t.Error("an edited record verified")
	}
	first["record"] = orig
	bundle["keys"] = []any{"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp"}
	if err := docVerifyBundle(bundle); err == nil {
		t.Error("a checkpoint signed by a key the bundle does not list verified")
	}
}

// docInclusion is RFC 9162 §2.1.3.2, as docs/audit.md gives it.
func docInclusion(proof [][]byte, m, n int64, leaf, root []byte) error {
	if m >= n {
		return errors.New("leaf past the tree")
	}
	fn, sn, r := m, n-1, leaf
	for _, p := range proof {
		if sn == 0 {
			return errors.New("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			h := sha256.Sum256(append(append([]byte{1}, p...), r...))
			r = h[:]
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			h := sha256.Sum256(append(append([]byte{1}, r...), p...))
			r = h[:]
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || !bytes.Equal(r, root) {
		return errors.New("the proof does not lead to the root")
	}
	return nil
}

// docDIDKey decodes a did:key as docs/audit.md says: "did:key:z" +
// base58btc(0xed 0x01 || key).
func docDIDKey(did string) (ed25519.PublicKey, error) {
	s, ok := strings.CutPrefix(did, "did:key:z")
	if !ok {
		return nil, errors.New("not a did:key")
	}
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	n := new(big.Int)
	for _, c := range s {
		i := strings.IndexRune(alphabet, c)
		if i < 0 {
			return nil, errors.New("not base58")
		}
		n.Mul(n, big.NewInt(58)).Add(n, big.NewInt(int64(i)))
	}
	b := n.Bytes()
	if len(b) != 34 || b[0] != 0xed || b[1] != 0x01 {
		return nil, errors.New("not an Ed25519 did:key")
	}
	return ed25519.PublicKey(b[2:]), nil
}

// docOpenNote checks a signed note as docs/audit.md says, signed by one
// of keys, and returns its text.
func docOpenNote(note string, keys []string) (string, error) {
	i := strings.LastIndex(note, "\n\n")
	if i < 0 {
		return "", errors.New("no signature block")
	}
	text, sigs := note[:i+1], note[i+2:]
	for _, line := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		rest, ok := strings.CutPrefix(line, "— ")
		if !ok {
			return "", errors.New("a signature line without its dash")
		}
		name, sig64, _ := strings.Cut(rest, " ")
		known := false
		for _, k := range keys {
			known = known || k == name
		}
		if !known {
			continue
		}
		pub, err := docDIDKey(name)
		if err != nil {
			return "", err
		}
		sig, err := base64.StdEncoding.DecodeString(sig64)
		if err != nil || len(sig) != 4+ed25519.SignatureSize {
			return "", errors.New("a signature of the wrong size")
		}
		kh := sha256.Sum256(append(append([]byte(name+"\n"), 1), pub...))
		if !bytes.Equal(sig[:4], kh[:4]) {
			return "", errors.New("the key hash does not match")
		}
		if !ed25519.Verify(pub, []byte(text), sig[4:]) {
			return "", errors.New("the signature does not verify")
		}
		return text, nil
	}
	return "", errors.New("signed by no key the bundle lists")
}

// docVerifyBundle verifies a bundle as docs/audit.md says (steps 1-4).
func docVerifyBundle(b map[string]any) error {
	if b["format"] != "ifaced-audit-bundle/1" {
		return errors.New("format")
	}
	var keys []string
	for _, k := range b["keys"].([]any) {
		keys = append(keys, k.(string))
	}
	type cp struct {
		day  string
		size int64
		root []byte
	}
	var cps []cp
	for _, n := range b["checkpoints"].([]any) {
		text, err := docOpenNote(n.(string), keys)
		if err != nil {
			return err
		}
		l := strings.Split(text, "\n")
		day, ok := strings.CutPrefix(l[0], "ifaced-audit/")
		size, err := strconv.ParseInt(l[1], 10, 64)
		root, rerr := base64.StdEncoding.DecodeString(l[2])
		if !ok || err != nil || rerr != nil || len(root) != 32 {
			return errors.New("a checkpoint's text")
		}
		cps = append(cps, cp{day, size, root})
	}
	conv := b["conversation_id"].(string)
	for i, r := range b["records"].([]any) {
		r := r.(map[string]any)
		c := cps[int(r["checkpoint"].(float64))]
		m := int64(r["leaf"].(float64))
		var proof [][]byte
		for _, p := range r["proof"].([]any) {
			h, err := base64.StdEncoding.DecodeString(p.(string))
			if err != nil {
				return err
			}
			proof = append(proof, h)
		}
		rec := r["record"].(string)
		h := sha256.Sum256(append([]byte{0}, rec...))
		if err := docInclusion(proof, m, c.size, h[:], c.root); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		var e struct {
			At      string `json:"at"`
			Message struct {
				Headers struct {
					ConversationID string `json:"conversation_id"`
				} `json:"headers"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(rec), &e); err != nil {
			return err
		}
		if !strings.HasPrefix(e.At, c.day) {
			return fmt.Errorf("record %d: recorded %s, checkpoint of %s", i, e.At, c.day)
		}
		if e.Message.Headers.ConversationID != conv {
			return fmt.Errorf("record %d: of conversation %s", i, e.Message.Headers.ConversationID)
		}
	}
	return nil
}
