package gossip

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
)

// A refusal summary of a message near the 1 MiB frame bound costs the
// summary, not the message: its excerpt is bounded, and making it
// allocates nowhere near the message's size (before, the whole message
// was encoded as JSON to take 2 KiB of it).
func TestSummariseRefusalIsBounded(t *testing.T) {
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	m := sampleMessage(alice, bob)
	m.Body.Text = strings.Repeat("x", 900<<10)
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "big", Content: map[string]any{"blob": strings.Repeat("y", 100<<10)}}}
	m.Headers.Extensions = map[string]any{"pad": strings.Repeat("z", 10<<10)}
	var r Refusal
	SummariseRefusal(&r, m, nil) // warm up
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		r = Refusal{}
		SummariseRefusal(&r, m, nil)
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / runs
	if perCall > 64<<10 {
		t.Errorf("summarising a 1 MiB message allocates %d bytes, want at most 64 KiB", perCall)
	}
	if len(r.Excerpt) > RefusalExcerpt || r.MessageID != m.Headers.MessageID {
		t.Errorf("summary: excerpt of %d bytes, message ID %q", len(r.Excerpt), r.MessageID)
	}
	if strings.Contains(r.Excerpt, "yyyy") || strings.Contains(r.Excerpt, "zzzz") {
		t.Errorf("the excerpt holds a part's content or an extension: %.200s", r.Excerpt)
	}
	if !strings.Contains(r.Excerpt, `"name":"big"`) {
		t.Errorf("the excerpt does not name the message's parts: %.300s", r.Excerpt)
	}

	// The bytes as received: hashed, sized, and their start kept as text
	// (JSON) or hex (CBOR).
	for _, raw := range [][]byte{[]byte(`{"ifp":4,"headers":` + strings.Repeat(" ", 1<<20)), append([]byte{0xa3, 0x00, 0xff}, make([]byte, 1<<20)...)} {
		var r Refusal
		SummariseRefusal(&r, nil, raw)
		if r.Size != len(raw) || len(r.SHA256) != 64 || len(r.Excerpt) > RefusalExcerpt || r.Excerpt == "" {
			t.Errorf("summary of %d raw bytes: size %d, sha256 %q, excerpt of %d bytes", len(raw), r.Size, r.SHA256, len(r.Excerpt))
		}
		if raw[0] == 0xa3 && !strings.HasPrefix(r.Excerpt, "hex:a300ff") {
			t.Errorf("a binary frame's excerpt is %.40q, want hex", r.Excerpt)
		}
	}
}

// clock is a settable clock for the audit log's days.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// fillDay records entries dated day until the day holds at least n bytes.
func fillDay(t *testing.T, a *AuditLog, day time.Time, n int64) {
	t.Helper()
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	conv := fmt.Sprintf("conv:%s", strings.ReplaceAll(day.Format(auditDayLayout), "-", ""))
	for i := int64(1); dirBytes(t, filepath.Join(a.dir, day.Format(auditDayLayout))) < n; i++ {
		m := auditMessage(t, alice, bob, conv, i, "")
		m.Body.Text = strings.Repeat("entry ", 2000)
		if err := m.Sign(alice, testNow); err != nil {
			t.Fatal(err)
		}
		if err := a.Record(AuditEntry{At: day, Direction: Received, Peer: alice.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil { // the .md counts too
			t.Fatal(err)
		}
	}
}

// dirBytes is the bytes the files under dir take, in whole 4 KiB blocks
// as the quota counts them.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += roundBlock(info.Size())
		}
		return nil
	})
	return n
}

func dayDirs(t *testing.T, a *AuditLog) []string {
	t.Helper()
	days, err := a.days()
	if err != nil {
		t.Fatal(err)
	}
	return days
}

// Over the quota, whole days go, oldest first, never the current one;
// when the current day alone is over it, refusals are no longer written
// and, past the headroom, Room says there is no room for new
// conversations, while entries are still written.
func TestAuditLogQuotaDeletesOldestDays(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: testNow.AddDate(0, 0, -3)}
	const quota = 256 << 10
	a, err := OpenAuditLog(dir, WithLimits(AuditLimits{MaxBytes: quota}), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for d := 3; d >= 1; d-- {
		c.t = testNow.AddDate(0, 0, -d)
		fillDay(t, a, c.t, 60<<10)
	}
	if got := dayDirs(t, a); len(got) != 3 {
		t.Fatalf("days %v, want 3 under the quota", got)
	}
	c.t = testNow
	fillDay(t, a, c.t, 100<<10) // the fourth day takes the log over the quota
	got := dayDirs(t, a)
	if len(got) != 3 || got[0] != testNow.AddDate(0, 0, -2).Format(auditDayLayout) {
		t.Errorf("days after passing the quota: %v, want the oldest gone", got)
	}
	if a.Usage() > quota || a.Usage() != dirBytes(t, dir)-dirBytes(t, filepath.Join(dir, spareDir)) {
		t.Errorf("usage %d (on disk %d), want the count of the files, under %d", a.Usage(), dirBytes(t, dir), quota)
	}
	if err := a.Room(); err != nil {
		t.Errorf("room under the quota: %v", err)
	}

	// Today alone over the quota: older days all go; refusals are counted
	// by the caller, not written; past the headroom, no new conversations.
	fillDay(t, a, c.t, quota+1)
	if got := dayDirs(t, a); len(got) != 1 || got[0] != testDay {
		t.Errorf("days %v, want only today", got)
	}
	if err := a.RecordRefusal(Refusal{At: c.t, Transport: "libp2p", Code: "wrong_key"}); !errors.Is(err, ErrNoRoom) {
		t.Errorf("a refusal with today over the quota: %v, want ErrNoRoom", err)
	}
	if err := a.Room(); err != nil {
		t.Errorf("room within the headroom: %v", err)
	}
	fillDay(t, a, c.t, quota+quota/Headroom+1)
	if err := a.Room(); !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "audit.max_mb") {
		t.Errorf("room past the headroom: %v, want ErrNoRoom naming audit.max_mb", err)
	}

	// At the next open the count is measured again, the same.
	want := a.Usage()
	a.Close()
	b, err := OpenAuditLog(dir, WithLimits(AuditLimits{MaxBytes: quota}), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Usage() != want {
		t.Errorf("usage measured at open %d, counted %d", b.Usage(), want)
	}
}

// Days older than the retention are deleted at open and at the first
// write of a new day.
func TestAuditLogRetention(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: testNow.AddDate(0, 0, -10)}
	a, err := OpenAuditLog(dir, WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{10, 8, 7, 2} {
		fillDay(t, a, testNow.AddDate(0, 0, -d), 1)
	}
	a.Close()
	c.t = testNow
	a, err = OpenAuditLog(dir, WithLimits(AuditLimits{Retention: 7 * 24 * time.Hour}), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := []string{testNow.AddDate(0, 0, -7).Format(auditDayLayout), testNow.AddDate(0, 0, -2).Format(auditDayLayout)}
	if got := dayDirs(t, a); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("days after opening with a retention of 7 days: %v, want %v", got, want)
	}
	c.t = testNow.AddDate(0, 0, 1) // a day later: the first write of the day sweeps
	fillDay(t, a, c.t, 1)
	if got := dayDirs(t, a); len(got) != 2 || got[0] != want[1] {
		t.Errorf("days after the first write of a new day: %v, want %s and today", got, want[1])
	}
}

// Below the free-disk watermark there is no room for new conversations
// nor for refusals; entries are still written.
func TestAuditLogFreeDiskWatermark(t *testing.T) {
	free := uint64(1 << 30)
	a, err := OpenAuditLog(t.TempDir(), WithLimits(AuditLimits{MinFree: 512 << 20}),
		WithFreeSpace(func() (uint64, error) { return free, nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Room(); err != nil {
		t.Fatalf("room with 1 GiB free: %v", err)
	}
	free = 100 << 20
	if err := a.Room(); !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "audit.min_free_mb") {
		t.Errorf("room with 100 MiB free: %v, want ErrNoRoom naming audit.min_free_mb", err)
	}
	if err := a.RecordRefusal(Refusal{At: testNow, Transport: "libp2p", Code: "wrong_key"}); !errors.Is(err, ErrNoRoom) {
		t.Errorf("a refusal below the watermark: %v, want ErrNoRoom", err)
	}
	fillDay(t, a, testNow, 1)
}

// The file system's free space is asked at most once per FreeSpaceEvery:
// the calls between get the figure asked last, and the first call after
// the interval asks again (a statfs per new conversation was 4 % of an
// answering daemon's CPU).
func TestRecentFreeAsksOncePerInterval(t *testing.T) {
	asked := 0
	free := uint64(1 << 30)
	clock := testNow
	f := recentFree(func() (uint64, error) { asked++; return free, nil }, FreeSpaceEvery, func() time.Time { return clock })
	for range 100 {
		if n, err := f(); n != 1<<30 || err != nil {
			t.Fatalf("free: %d, %v; want 1 GiB", n, err)
		}
	}
	if asked != 1 {
		t.Fatalf("asked the file system %d times in 100 calls within the interval, want once", asked)
	}
	free = 100 << 20
	clock = clock.Add(FreeSpaceEvery - time.Nanosecond)
	if n, _ := f(); n != 1<<30 || asked != 1 {
		t.Errorf("just within the interval: %d free after %d asks, want the figure asked first", n, asked)
	}
	clock = clock.Add(time.Nanosecond)
	if n, _ := f(); n != 100<<20 || asked != 2 {
		t.Errorf("once the interval passed: %d free after %d asks, want 100 MiB, asked again", n, asked)
	}
	clock = clock.Add(-time.Hour) // a clock that went back asks again
	if _, _ = f(); asked != 3 {
		t.Errorf("after the clock went back: %d asks, want 3", asked)
	}
}
