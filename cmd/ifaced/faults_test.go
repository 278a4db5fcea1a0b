package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/pelletier/go-toml/v2"
)

// Fault tests with real processes (DESIGN.md §8, Reliability: a daemon
// killed at any moment restarts with its cache, trust records, mailbox and
// audit log intact). The short variant kills the daemon once; setting
// IFACED_LONG_FAULTS=1 kills it five times. Both are skipped with -short,
// as they build the binary.

// killRounds is how many times TestFaultKillDuringLoad kills the daemon,
// and how many greetings B must have seen answered in each round first.
func killRounds() (rounds, greetings int) {
	if os.Getenv("IFACED_LONG_FAULTS") == "1" {
		return 5, 100
	}
	return 1, 20
}

// buildIfaced builds this command into a temporary directory, once for
// every test of the package (linking it takes tens of seconds on two
// cores); TestMain removes it.
func buildIfaced(t *testing.T) string { return built.get(t) }

// binaryBuild is one build of this command, made once for every test of
// the package into a temporary directory that TestMain removes.
type binaryBuild struct {
	flags     []string // go build's flags beyond -o
	once      sync.Once
	dir, bin  string
	skip, err string
}

var (
	built           = &binaryBuild{}                                       // buildIfaced's
	builtFaultClock = &binaryBuild{flags: []string{"-tags", "faultclock"}} // buildIfacedFaultClock's
	builds          = []*binaryBuild{built, builtFaultClock}
)

// get builds the binary the first time it is asked for and returns it; a
// machine without the go command skips the test.
func (b *binaryBuild) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			b.skip = "no go command to build the binary with"
			return
		}
		if b.dir, err = os.MkdirTemp("", "ifaced-bin-"); err != nil {
			b.err = err.Error()
			return
		}
		bin := filepath.Join(b.dir, "ifaced")
		args := append(append([]string{"build"}, b.flags...), "-o", bin, ".")
		if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
			b.err = fmt.Sprintf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		b.bin = bin
	})
	switch {
	case b.skip != "":
		t.Skip(b.skip)
	case b.err != "":
		t.Fatal(b.err)
	}
	return b.bin
}

// daemonProc is an `ifaced run` process; its log goes to a file.
type daemonProc struct {
	home   config.Home
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited
}

func startProc(t *testing.T, bin string, home config.Home) *daemonProc {
	t.Helper()
	return startProcEnv(t, bin, home)
}

// startProcEnv is startProc with env added to the process's environment.
func startProcEnv(t *testing.T, bin string, home config.Home, env ...string) *daemonProc {
	t.Helper()
	p := &daemonProc{home: home, log: filepath.Join(t.TempDir(), fmt.Sprintf("run-%d.log", time.Now().UnixNano())), exited: make(chan struct{})} // off the home: a test may fill its disk
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "run", "--home", home.Dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() // by PID; an error only says it has exited already
		<-p.exited
	})
	return p
}

// logTail is the end of the process's log, for failure messages.
func (p *daemonProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	return string(b[max(0, len(b)-4000):])
}

// waitAPI polls the control API until this process answers (a killed
// predecessor may have left its api.addr behind), and returns its status.
func (p *daemonProc) waitAPI(t *testing.T) *api.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before serving its API: %v\n%s", p.home.Dir, p.err, p.logTail())
		default:
		}
		if c, err := api.Dial(p.home); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := c.Status(ctx)
			cancel()
			c.Close()
			if err == nil {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no control API after 60 s\n%s", p.home.Dir, p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the API, nothing to wait on
	}
}

// kill ends the process with SIGKILL and waits for it to be gone.
func (p *daemonProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("process %d still running 30 s after SIGKILL", p.cmd.Process.Pid)
	}
}

// inProcess starts a daemon in this process in a fresh home.
func inProcess(t *testing.T, cfg *config.Config, opts ...node.Option) *node.Node {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, id, h, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// quietConfig listens on loopback TCP, discovers nothing by itself, and
// lifts the message rate limit (the load below greets as fast as it can;
// the answers count against the greeter's limit too).
func quietConfig() *config.Config {
	c := config.DefaultConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	c.API.Listen = "127.0.0.1:0"
	c.Discovery.MDNS, c.Discovery.DHT, c.Discovery.Gossip = false, config.DHTOff, false
	c.Rates = config.RatesConfig{Cool: 1 << 30, Warm: 1 << 30, Hot: 1 << 30}
	return c
}

func writeConfig(t *testing.T, h config.Home, c *config.Config) {
	t.Helper()
	body, err := toml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.ParseConfig(body); err != nil {
		t.Fatalf("the test's config does not load: %v", err)
	}
	if err := os.WriteFile(h.ConfigPath(), body, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFaultKillDuringLoad: daemon A (a process; also a relay holding
// IFP-8 mailboxes) is under load from B (in this process), which greets it
// and talks to it from three goroutines and leaves mail at it for C, a
// peer that registered there and went away. Once some of that work is
// acknowledged (greetings answered, mail accepted by the relay), A is
// killed with SIGKILL in the middle of the load, and its data directory
// is checked before it restarts on it:
//
//   - the store opens at once (the lock died with the process) and every
//     record in it decodes;
//   - B's cached view and B's pinned key (ifaced trust B --verify) are there;
//   - every mail A acknowledged is held, once;
//   - every greeting B saw answered is in A's audit log, B's greeting as
//     received and A's answer as sent, with the message IDs B has;
//   - a torn audit line, should the kill have cut one, is reported and the
//     rest of the file read.
//
// A then restarts on the same data directory and serves the same facts
// through its verbs, and B's next greeting is granted the pinned level.
// Finally a torn line is planted where a kill could leave one: `ifaced
// audit` warns of it and shows the entries around it.
func TestFaultKillDuringLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a daemon")
	}
	bin := buildIfaced(t)
	aHome := config.Home{Dir: filepath.Join(t.TempDir(), "a")}
	if _, err := aHome.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	ac := quietConfig()
	ac.Relay.Service, ac.Relay.Mailbox = true, true
	writeConfig(t, aHome, ac)
	a := startProc(t, bin, aHome)
	st := a.waitAPI(t)
	aID, err := peer.Decode(st.PeerID)
	if err != nil {
		t.Fatal(err)
	}

	b := inProcess(t, quietConfig(), node.WithMailRetries(100*time.Millisecond))
	bID := b.ID().PeerID()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	// A's owner pins B's key, compared out of band.
	wantLines(t, "trust --verify", mustRun(t, aHome.Dir, "trust", bID.String(), "--verify", b.ID().Fingerprint()), "is now at level 2 (verified)")

	// C registers at A's mailbox (by reserving a slot), lets B cache its
	// view, which names A as its relay, and goes away.
	cc := quietConfig()
	cc.Relay.Use = []string{st.Addrs[0]}
	c := inProcess(t, cc)
	cID := c.ID().PeerID()
	waitUntil(t, "C's slot on A", func() bool { return len(c.Mail().RelayReservations()) == 1 })
	if _, err := b.Connect(ctx, c.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueryCapabilities(ctx, cID, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitUntil(t, "B to see C go", func() bool { return len(b.Host().Network().ConnsToPeer(cID)) == 0 })

	// The load: greetings, messages in a conversation, mail for C.
	var greeted, mailed atomic.Int64
	var ackMu sync.Mutex
	acked := map[string]bool{} // message IDs A's mailbox acknowledged
	stop := make(chan struct{})
	go func() {
		for {
			// A subscriber that falls behind is dropped: subscribe again.
			evs, unsubscribe := b.Subscribe()
			for open := true; open; {
				select {
				case <-stop:
					unsubscribe()
					return
				case e, ok := <-evs:
					open = ok
					var id, relay string
					if ok && e.Type == events.EventMail && strings.Contains(e.Detail, " left at relay ") {
						fmt.Sscanf(e.Detail, "message %s left at relay %s", &id, &relay)
						if relay == aID.String() {
							ackMu.Lock()
							acked[id] = true
							ackMu.Unlock()
						}
					}
				}
			}
			unsubscribe()
		}
	}()
	var load sync.WaitGroup
	loop := func(f func(i int)) {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
			}
		}()
	}
	for range 2 {
		loop(func(int) {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			if _, err := b.QueryCapabilities(cctx, aID, negotiate.Proposal{}); err == nil {
				greeted.Add(1)
			} else {
				time.Sleep(20 * time.Millisecond) // A is down: do not spin
			}
		})
	}
	loop(func(i int) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if _, err := b.Send(cctx, aID, fmt.Sprintf("load message %d", i)); err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	})
	loop(func(i int) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if res, err := b.Send(cctx, cID, fmt.Sprintf("mail %d for C", i)); err == nil && res.Delivered == "queued" {
			mailed.Add(1)
		}
		time.Sleep(100 * time.Millisecond) // a steady trickle of mail, within the relay's rate limit
	})
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		load.Wait()
	})
	defer stopLoad()

	aKey, err := identity.LoadKey(aHome.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	aDID := aKey.DID()
	rounds, perRound := killRounds()
	for round := 1; round <= rounds; round++ {
		ackMu.Lock()
		ackedBefore := len(acked)
		ackMu.Unlock()
		greetedBefore := greeted.Load()
		waitUntil(t, "acknowledged work", func() bool {
			ackMu.Lock()
			defer ackMu.Unlock()
			return greeted.Load() >= greetedBefore+int64(perRound) && len(acked) >= ackedBefore+3
		})
		a.kill(t)
		ackMu.Lock()
		ackedMail := make([]string, 0, len(acked))
		for id := range acked {
			ackedMail = append(ackedMail, id)
		}
		ackMu.Unlock()
		checked := checkKilledHome(t, aHome, b, cID, ackedMail)
		// Its tamper-evident audit log verifies as it was left: what was
		// not yet in a checkpoint pending, nothing failing.
		if rep, err := gossip.VerifyAuditLog(filepath.Join(aHome.Dir, "audit"), gossip.VerifyOptions{Trusted: func(d string) bool { return d == aDID }}); err != nil || !rep.Open {
			t.Fatalf("round %d: the killed daemon's audit log: %+v, %v", round, rep, err)
		}
		t.Logf("round %d: %d greetings answered, %d mails queued, %d left at A; killed; %d answered conversations and %d mails checked",
			round, greeted.Load(), mailed.Load(), len(ackedMail), checked, len(ackedMail))

		a = startProc(t, bin, aHome)
		st = a.waitAPI(t)
		if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
			t.Fatal(err)
		}
		checkRestarted(t, aHome, b)
	}

	// A torn line where a kill can leave one: the end of a conversation's
	// .jsonl. The daemon starts, and `ifaced audit` warns and reads on.
	stopLoad()
	a.kill(t)
	aLog, err := gossip.OpenAuditLog(filepath.Join(aHome.Dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	convs, err := aLog.Conversations()
	if err != nil && !errors.Is(err, gossip.ErrTornAuditLine) {
		t.Fatal(err)
	}
	var victim gossip.AuditConversation
	for _, cv := range convs {
		if cv.Messages >= 2 {
			victim = cv
			break
		}
	}
	if victim.ID == "" {
		t.Fatal("A's audit log has no conversation of two messages")
	}
	jsonl := strings.TrimSuffix(victim.File, ".md") + ".jsonl"
	f, err := os.OpenFile(jsonl, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"at":"2026-01-01T00:00:00Z","direction":"rece`)
	f.Close()
	a = startProc(t, bin, aHome)
	a.waitAPI(t)
	r := ifaced(t, aHome.Dir, "audit", "--conversation", victim.ID)
	if r.code != 0 || !strings.Contains(r.stderr, "warning:") || !strings.Contains(r.stderr, "partial line") {
		t.Errorf("audit of a conversation with a torn line: exit %d, stderr %q; want exit 0 and a warning", r.code, r.stderr)
	}
	if got := strings.Count(r.stdout, "\n"); got < victim.Messages {
		t.Errorf("audit of a conversation with a torn line shows %d lines, want its %d entries:\n%s", got, victim.Messages, r.stdout)
	}
	var list api.AuditList
	if err := json.Unmarshal([]byte(mustRun(t, aHome.Dir, "audit", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cv := range list.Conversations {
		found = found || cv.ID == victim.ID && cv.Messages == victim.Messages
	}
	if !found {
		t.Errorf("audit --json lists no conversation %s of %d messages (warning %q)", victim.ID, victim.Messages, list.Warning)
	}
}

// waitUntil polls cond for up to 60 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling
	}
}

// checkKilledHome checks A's data directory while A is dead, and returns
// how many conversations B saw answered.
func checkKilledHome(t *testing.T, aHome config.Home, b *node.Node, cID peer.ID, ackedMail []string) int {
	t.Helper()
	bID := b.ID().PeerID().String()

	// The store: opens at once, every record decodes.
	start := time.Now()
	s, err := store.Open(filepath.Join(aHome.Dir, "ifaced.db"))
	if err != nil {
		t.Fatalf("opening the killed daemon's store: %v", err)
	}
	defer s.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("opening the killed daemon's store took %s", took)
	}
	peers, err := s.Peers()
	if err != nil {
		t.Errorf("peer cache: %v", err)
	}
	if _, err := s.Trusts(); err != nil {
		t.Errorf("trust records: %v", err)
	}
	for what, f := range map[string]func() error{
		"outbox":         func() error { _, err := s.Mailboxes().Outbox(); return err },
		"own document":   func() error { _, _, err := s.Own().OwnDocument(); return err },
		"policy":         func() error { _, err := s.PolicyOverrides(); return err },
		"issued intros":  func() error { _, err := s.IssuedIntros(); return err },
		"held intros":    func() error { _, err := s.HeldIntros(); return err },
		"imported cards": func() error { _, err := s.Imports().All(); return err },
	} {
		if err := f(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// B's cached view, verified again.
	var cached *store.PeerRecord
	for i := range peers {
		if peers[i].PeerID == bID {
			cached = &peers[i]
		}
	}
	if cached == nil {
		t.Errorf("the peer cache lost B")
	} else {
		view, err := negotiate.DecodeView(cached.View)
		if err == nil {
			err = view.Verify(b.ID().PublicKey())
		}
		if err != nil || cached.Seq != b.Document().Seq {
			t.Errorf("B's cached view: seq %d (B's is %d), %v", cached.Seq, b.Document().Seq, err)
		}
	}
	if tr, err := s.Trust(bID); err != nil || tr.PinnedKey != b.ID().Fingerprint() {
		t.Errorf("B's trust record: %+v, %v; want B's key pinned", tr, err)
	}
	// Every acknowledged mail, held once.
	held, _, err := s.Mailboxes().Mail(cID.String(), time.Now(), 1<<20, 1<<30)
	if err != nil {
		t.Errorf("mail held for C: %v", err)
	}
	count := map[string]int{}
	for _, m := range held {
		count[m.MessageID]++
	}
	for _, id := range ackedMail {
		if count[id] != 1 {
			t.Errorf("mail %s, acknowledged by A, is held %d times", id, count[id])
		}
	}

	// Every greeting B saw answered is in A's audit log.
	aLog, err := gossip.OpenAuditLog(filepath.Join(aHome.Dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	switch _, err := aLog.Conversations(); {
	case errors.Is(err, gossip.ErrTornAuditLine):
		t.Logf("the kill tore an audit line, reported and skipped: %v", err)
	case err != nil:
		t.Errorf("A's audit log after the kill: %v", err)
	}
	convs, err := b.Audit().Conversations()
	if err != nil && !errors.Is(err, gossip.ErrTornAuditLine) {
		t.Fatal(err)
	}
	aPeer := ownPeerID(t, aHome)
	checked := 0
	for _, cv := range convs {
		if !slices.Contains(cv.Peers, aPeer) {
			continue
		}
		entries, err := b.Audit().Entries(cv.ID)
		if err != nil && !errors.Is(err, gossip.ErrTornAuditLine) {
			t.Fatalf("B's audit of %s: %v", cv.ID, err)
		}
		var ours, answer *gossip.AuditEntry
		for i, e := range entries {
			if e.Message.Headers.Phase != gossip.PhaseGreeting {
				continue
			}
			switch {
			case e.Direction == gossip.Sent && ours == nil:
				ours = &entries[i]
			case e.Direction == gossip.Received && answer == nil && e.Note == "":
				answer = &entries[i]
			}
		}
		if ours == nil || answer == nil {
			continue // not answered: A owes nothing
		}
		checked++
		theirs, err := aLog.Entries(cv.ID)
		switch {
		case errors.Is(err, gossip.ErrTornAuditLine):
			t.Logf("A's audit of %s: %v", cv.ID, err) // reported, not fatal
		case errors.Is(err, fs.ErrNotExist):
			t.Errorf("A's audit log lost conversation %s, which B saw answered", cv.ID)
			continue
		case err != nil:
			t.Errorf("A's audit of %s: %v", cv.ID, err)
			continue
		}
		var gotOurs, gotAnswer bool
		for _, e := range theirs {
			id := e.Message.Headers.MessageID
			gotOurs = gotOurs || e.Direction == gossip.Received && id == ours.Message.Headers.MessageID
			gotAnswer = gotAnswer || e.Direction == gossip.Sent && id == answer.Message.Headers.MessageID
		}
		if !gotOurs || !gotAnswer {
			t.Errorf("A's audit of %s: B's greeting recorded %v, A's answer recorded %v; both must be", cv.ID, gotOurs, gotAnswer)
		}
	}
	if checked == 0 {
		t.Error("B saw no greeting answered")
	}
	return checked
}

// ownPeerID is the peer ID of the key in home.
func ownPeerID(t *testing.T, h config.Home) string {
	t.Helper()
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	return id.PeerID().String()
}

// checkRestarted checks, through the verbs, that the restarted daemon
// serves what the killed one knew, and that B's next greeting is granted
// the level B's pinned key gives it.
func checkRestarted(t *testing.T, aHome config.Home, b *node.Node) {
	t.Helper()
	bID := b.ID().PeerID()
	var peerList api.PeerList // peers --json has the API's shape
	if err := json.Unmarshal([]byte(mustRun(t, aHome.Dir, "peers", "--json")), &peerList); err != nil {
		t.Fatal(err)
	}
	peers := peerList.Peers
	if !slices.ContainsFunc(peers, func(p api.Peer) bool { return p.PeerID == bID.String() && p.Cached && p.Seq == b.Document().Seq }) {
		t.Errorf("peers after the restart does not list B's cached view: %+v", peers)
	}
	var info trust.Info
	if err := json.Unmarshal([]byte(mustRun(t, aHome.Dir, "trust", bID.String(), "--json")), &info); err != nil || info.Level != conditions.Verified {
		t.Errorf("trust B after the restart: %+v %v, want level 2 (verified)", info, err)
	}
	var list api.AuditList
	if err := json.Unmarshal([]byte(mustRun(t, aHome.Dir, "audit", "--json")), &list); err != nil || len(list.Conversations) == 0 {
		t.Errorf("audit --json after the restart: %d conversations, %v", len(list.Conversations), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aID, _ := peer.Decode(ownPeerID(t, aHome))
	res, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	if err != nil || res.GrantedToUs.AuthLevel != conditions.Verified {
		t.Errorf("B's greeting after the restart: granted %+v, %v; want level 2 (verified)", res, err)
	}
}
