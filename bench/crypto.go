package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// pairCost is what one Ed25519 signature and one verification cost on one
// core, with the payload sizes of a greeting: the reply signed, the
// request verified (what the answering daemon must do at the least).
type pairCost struct {
	sign, verify      samples
	signSize, verSize int
	err               error
}

// pair is the median of one sign plus one verify; 0 if not measured.
func (p pairCost) pair() time.Duration {
	if p.err != nil || len(p.sign) == 0 {
		return 0
	}
	return p.sign.median() + p.verify.median()
}

// measureSignVerify times n signatures of a signSize-byte payload and n
// verifications of a verifySize-byte one, on one goroutine.
func measureSignVerify(n, signSize, verifySize int) pairCost {
	p := pairCost{signSize: signSize, verSize: verifySize}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		p.err = fmt.Errorf("generating a key: %w", err)
		return p
	}
	toSign, toVerify := make([]byte, signSize), make([]byte, verifySize)
	rand.Read(toSign)
	rand.Read(toVerify)
	sig := ed25519.Sign(priv, toVerify)
	for i := range n + n/10 {
		t := time.Now()
		ed25519.Sign(priv, toSign)
		d := time.Since(t)
		t = time.Now()
		ok := ed25519.Verify(pub, toVerify, sig)
		dv := time.Since(t)
		if !ok {
			p.err = errors.New("a valid signature did not verify")
			return p
		}
		if i >= n/10 { // the first tenth warms up
			p.sign, p.verify = append(p.sign, d), append(p.verify, dv)
		}
	}
	return p
}

// The floors' framing: a 4-byte big-endian length, the payload, and,
// when signed, the payload's 64-byte Ed25519 signature.
const maxFloorFrame = 1 << 20

// writeSigned writes payload as one frame, signed with priv (unsigned
// when priv is nil).
func writeSigned(w io.Writer, payload []byte, priv ed25519.PrivateKey) error {
	sigSize := 0
	if priv != nil {
		sigSize = ed25519.SignatureSize
	}
	buf := make([]byte, 4+len(payload)+sigSize)
	binary.BigEndian.PutUint32(buf, uint32(len(payload)))
	copy(buf[4:], payload)
	if priv != nil {
		copy(buf[4+len(payload):], ed25519.Sign(priv, payload))
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("writing a signed frame: %w", err)
	}
	return nil
}

// readVerified reads one frame and verifies its signature under pub,
// verifies times (a greeting's receiver may verify the message and the
// view inside it); with pub nil the frame is unsigned.
func readVerified(r io.Reader, pub ed25519.PublicKey, verifies int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("reading frame length: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFloorFrame {
		return nil, fmt.Errorf("reading frame: %d bytes announced, at most %d", n, maxFloorFrame)
	}
	sigSize := 0
	if pub != nil {
		sigSize = ed25519.SignatureSize
	}
	buf := make([]byte, int(n)+sigSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("reading frame: %w", err)
	}
	if pub == nil {
		return buf, nil
	}
	for range verifies {
		if !ed25519.Verify(pub, buf[:n], buf[n:]) {
			return nil, errors.New("reading frame: the signature does not verify")
		}
	}
	return buf[:n], nil
}
