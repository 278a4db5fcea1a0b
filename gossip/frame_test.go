package gossip

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestFrames(t *testing.T) {
	m, from := signedSample(t)
	var buf bytes.Buffer
	if err := WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&buf, []byte{0xa0}); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(&buf)
	got, err := ReadMessage(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(from.PublicKey()); err != nil {
		t.Fatalf("message read from a frame: %v", err)
	}
	if b, err := ReadFrame(r); err != nil || !bytes.Equal(b, []byte{0xa0}) {
		t.Fatalf("second frame: %x %v", b, err)
	}
	if _, err := ReadFrame(r); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameRejects(t *testing.T) {
	var good bytes.Buffer
	WriteFrame(&good, bytes.Repeat([]byte{1}, 300))
	g := good.Bytes()
	cases := map[string]struct {
		in   []byte
		want error
	}{
		"truncated length":  {[]byte{0x80}, ErrTruncatedFrame},
		"truncated payload": {g[:100], ErrTruncatedFrame},
		"empty frame":       {[]byte{0x00}, ErrEmptyFrame},
		"oversized":         {[]byte{0x81, 0x80, 0x80, 0x01}, ErrFrameTooLarge}, // 2 MiB + 1
		"huge":              {[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrFrameTooLarge},
	}
	for name, tc := range cases {
		_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.in)))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Non-minimal and overflowing varints are refused, not misread, as
	// malformed input (wire code invalid_format), not as a failure here.
	for _, in := range [][]byte{
		{0x81, 0x00},             // 1, with a needless zero group
		{0x80, 0x80, 0x00},       // 0, likewise
		{0x81, 0x80, 0x80, 0x00}, // 1 in four bytes
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // ten bytes: past 63 bits
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, // no end in ten bytes
	} {
		_, err := ReadFrame(bufio.NewReader(bytes.NewReader(in)))
		if !errors.Is(err, ErrFrameLength) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v, want ErrFrameLength (ErrMalformed)", in, err)
		}
		if _, err := ReadMessage(bufio.NewReader(bytes.NewReader(in))); !errors.Is(err, ErrFrameLength) {
			t.Errorf("ReadMessage %x: %v, want ErrFrameLength", in, err)
		}
	}
	if err := WriteFrame(io.Discard, make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("writing an oversized frame: %v", err)
	}
	// A frame of garbage is a decode error, not a panic.
	var junk bytes.Buffer
	WriteFrame(&junk, []byte{0xff, 0x00, 0x13})
	if _, err := ReadMessage(bufio.NewReader(&junk)); !errors.Is(err, ErrMalformed) {
		t.Errorf("garbage frame: %v, want ErrMalformed", err)
	}
}

func FuzzReadMessage(f *testing.F) {
	m, _ := signedSample(f)
	var buf bytes.Buffer
	WriteMessage(&buf, m)
	f.Add(buf.Bytes())
	f.Add([]byte{0x00})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 4; i++ {
			var err error
			withinFactor(t, len(b), func() { _, err = ReadMessage(r) })
			if err != nil {
				// Every refusal is one a peer can be told about (a wire
				// code other than internal_error).
				known := err == io.EOF
				for _, s := range []error{ErrInvalidMessage, ErrMalformed, ErrTruncatedFrame, ErrEmptyFrame, ErrFrameTooLarge, ErrTooLarge} {
					known = known || errors.Is(err, s)
				}
				if !known {
					t.Fatalf("unclassified error: %v", err)
				}
				return
			}
		}
	})
}

// TestFramePayloadGrowsAsItArrives: a frame longer than the first buffer
// reads back whole, and a frame that announces 1 MiB but delivers a few
// bytes costs about what arrived, not what was announced.
func TestFramePayloadGrowsAsItArrives(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16) // 300 KiB: past the first buffer, and past a doubling
	var buf bytes.Buffer
	if err := WriteFrame(&buf, big); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	if got, err := ReadFrame(bufio.NewReader(bytes.NewReader(whole))); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("a 300 KiB frame: %d bytes, %v", len(got), err)
	}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(whole[:200<<10]))); !errors.Is(err, ErrTruncatedFrame) {
		t.Fatalf("a 300 KiB frame cut at 200 KiB: %v, want ErrTruncatedFrame", err)
	}
	stalled := append([]byte{0xff, 0xff, 0x3f}, "a few bytes"...) // announces 1048575
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(stalled)))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncatedFrame) {
		t.Fatalf("a frame that stops after a few bytes: %v, want ErrTruncatedFrame", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Errorf("reading a few bytes of a frame announcing 1 MiB allocated %d KiB", got>>10)
	}
}
