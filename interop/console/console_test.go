package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/interop/jsdeps"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
)

// Environment the test reads.
const (
	RequireBrowserEnv = "IFACED_REQUIRE_BROWSER" // "1": a missing Chromium or Node.js fails the test
	ShotsEnv          = "IFACED_CONSOLE_SHOTS"   // where the screenshots go
	DocsEnv           = "IFACED_CONSOLE_DOCS"    // a directory: the docs' pictures (console-desktop.png, console-phone.png) are written there too
	chromiumPath      = "/usr/bin/chromium"
)

// needBrowser skips t, or fails it under RequireBrowserEnv, when Chromium
// or Node.js is not here.
func needBrowser(t *testing.T) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv(RequireBrowserEnv) == "1" {
			t.Fatalf("%s, and %s=1", why, RequireBrowserEnv)
		}
		t.Skipf("%s: install it to run the console in a browser (Debian: apt-get install --no-install-recommends chromium; set %s=1 to make this a failure)", why, RequireBrowserEnv)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing("Chromium is not at " + chromiumPath)
	}
	if os.Getenv(RequireBrowserEnv) == "1" {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing(tool + " is not on PATH")
			}
		}
	}
	jsdeps.NeedNode(t)
}

// here is this package's directory.
func here(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find this test's source file")
	}
	return filepath.Dir(file)
}

func buildIfaced(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool, to build ifaced: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ifaced")
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/ifaced/ifaced/cmd/ifaced").CombinedOutput(); err != nil {
		t.Fatalf("building ifaced: %v\n%s", err, out)
	}
	return bin
}

// proc is an `ifaced run` process in its own home.
type proc struct {
	home   config.Home
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	c      *api.Client
}

// start runs `ifaced run` in a new home whose config.toml is toml, and
// waits for its control API.
func start(t *testing.T, bin, name, toml string) *proc {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), name)}
	if out, err := exec.Command(bin, "init", "--home", h.Dir).CombinedOutput(); err != nil {
		t.Fatalf("ifaced init: %v\n%s", err, out)
	}
	if toml != "" {
		if err := os.WriteFile(h.ConfigPath(), []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := &proc{home: h, log: filepath.Join(h.Dir, "run.log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "run", "--home", h.Dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		// SIGTERM, as a service manager stops it; then SIGKILL, by PID.
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not stop within 20 s of SIGTERM\n%s", name, p.logTail())
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before serving its API\n%s", name, p.logTail())
		default:
		}
		if c, err := api.Dial(h); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.Status(ctx)
			cancel()
			if err == nil {
				p.c = c
				t.Cleanup(c.Close)
				return p
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no control API after a minute\n%s", name, p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the API, nothing to wait on
	}
}

func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	return string(b[max(0, len(b)-4000):])
}

func (p *proc) run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--home", p.home.Dir)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ifaced %q: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

const aliceConfig = `version = 1

[identity]
display = "Alice's agent"

[[capabilities]]
name = "ping"
description = "Respond to connectivity tests"

[[capabilities]]
name = "calendar.availability"
description = "Share calendar availability windows"
conditions = { min_disclosure = "professional" }

[[capabilities]]
name = "diary.read"
description = "Read the diary"
advertise = "when-eligible"
conditions = { min_disclosure = "close" }
`

const bobConfig = `version = 1

[identity]
display = "Bob's agent"
`

const carolConfig = `version = 1

[identity]
display = "Carol's agent"
`

// openedPage runs `ifaced ui` for p as on a desktop, with an xdg-open
// that records what it was given (a login page's path), and returns
// that path.
func openedPage(t *testing.T, bin string, p *proc) string {
	t.Helper()
	opener, rec := t.TempDir(), filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > " + rec + ".tmp && mv " + rec + ".tmp " + rec + "\n"
	if err := os.WriteFile(filepath.Join(opener, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "ui", "--home", p.home.Dir)
	cmd.Env = append(os.Environ(), "DISPLAY=:99", "PATH="+opener+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "opened with xdg-open") {
		t.Fatalf("ifaced ui with an opener: %v\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(rec); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatal("the opener was not run within a minute")
		}
		time.Sleep(20 * time.Millisecond) // polling for the opener's record
	}
}

// summary is what console.mjs reports.
type summary struct {
	LoggedIn           bool   `json:"loggedIn"`
	OverviewPeerID     string `json:"overviewPeerID"`
	PageLoggedIn       bool   `json:"pageLoggedIn"`
	PageOverviewPeerID string `json:"pageOverviewPeerID"`
	Cookie             []struct {
		Name     string `json:"name"`
		HTTPOnly bool   `json:"httpOnly"`
		SameSite string `json:"sameSite"`
		Path     string `json:"path"`
	} `json:"cookie"`
	CodeReuseStatus       int      `json:"codeReuseStatus"`
	PeersListBob          bool     `json:"peersListBob"`
	BobTierBefore         string   `json:"bobTierBefore"`
	CalendarBefore        string   `json:"calendarBefore"`
	DiaryBefore           string   `json:"diaryBefore"`
	GrantNotice           string   `json:"grantNotice"`
	BobTierAfter          string   `json:"bobTierAfter"`
	CalendarAfter         string   `json:"calendarAfter"`
	FingerprintShown      string   `json:"fingerprintShown"`
	PinNotice             string   `json:"pinNotice"`
	BobLevelAfterPin      string   `json:"bobLevelAfterPin"`
	Token                 string   `json:"token"`
	IntroID               string   `json:"introID"`
	IntroStateMinted      string   `json:"introStateMinted"`
	IntroStateRevoked     string   `json:"introStateRevoked"`
	TokenShownAgain       bool     `json:"tokenShownAgain"`
	ConversationEntries   int      `json:"conversationEntries"`
	Refusals              int      `json:"refusals"`
	IFP3Start             string   `json:"ifp3Start"`
	WhyURL                string   `json:"whyURL"`
	WhyDecision           string   `json:"whyDecision"`
	WhyOutcome            string   `json:"whyOutcome"`
	WhyConditions         int      `json:"whyConditions"`
	WhyNoDecision         string   `json:"whyNoDecision"`
	WhyEntryShown         bool     `json:"whyEntryShown"`
	AddNotice             string   `json:"addNotice"`
	LiveEvent             string   `json:"liveEvent"`
	EventsGrew            bool     `json:"eventsGrew"`
	ForgedCSRFStatus      int      `json:"forgedCSRFStatus"`
	ForgedCSRFMessage     string   `json:"forgedCSRFMessage"`
	NoCookieStatus        int      `json:"noCookieStatus"`
	NoCookieMessage       string   `json:"noCookieMessage"`
	NoCookiePageShowsPeer bool     `json:"noCookiePageShowsPeerID"`
	NoCookiePostStatus    int      `json:"noCookiePostStatus"`
	PageErrors            []string `json:"pageErrors"`

	// The tamper-evident log: the conversation's state and its bundle,
	// the decision's inclusion.
	ProofState       string `json:"proofState"`
	ProofCheckpoints int    `json:"proofCheckpoints"`
	BundleName       string `json:"bundleName"`
	BundleSaved      bool   `json:"bundleSaved"`
	InclusionState   string `json:"inclusionState"`
	InclusionLeaf    string `json:"inclusionLeaf"`
	InclusionTree    string `json:"inclusionTree"`

	// The forms show the state; what bob holds beside what he would get.
	GrantTierShown string `json:"grantTierShown"`
	GrantPeerShown string `json:"grantPeerShown"`
	CapMaxShown    string `json:"capMaxShown"`
	BobHeldTier    string `json:"bobHeldTier"`
	CalendarHeld   string `json:"calendarHeld"`
	BobDifference  string `json:"bobDifference"`
	BobAdvice      string `json:"bobAdvice"`
	IntroConfirm   string `json:"introConfirm"`
	// Carol revoked, and refused everywhere.
	RevokeConfirm      string `json:"revokeConfirm"`
	RevokeNotice       string `json:"revokeNotice"`
	RevokeNoticeClass  string `json:"revokeNoticeClass"`
	CarolRevokeButtons int    `json:"carolRevokeButtons"`
	CarolPinButton     string `json:"carolPinButton"`
	CarolPeersRow      string `json:"carolPeersRow"`
	CarolPeersRowClass string `json:"carolPeersRowClass"`
	CarolRefusedNotice string `json:"carolRefusedNotice"`
	CarolSeenTables    int    `json:"carolSeenTables"`
	CarolPinAgain      int    `json:"carolPinAgain"`
	CarolPageText      string `json:"carolPageText"`
	// Her refused greeting, found from its event.
	CarolGreetingTaken bool     `json:"carolGreetingTaken"`
	RefusedEvent       string   `json:"refusedEvent"`
	EventsLive         string   `json:"eventsLive"`
	RefusedEventLinks  []string `json:"refusedEventLinks"`
	EventLinkStatuses  []int    `json:"eventLinkStatuses"`
	RefusalPageStatus  int      `json:"refusalPageStatus"`
	RefusalTargets     int      `json:"refusalTargets"`
	RefusalTargetCode  string   `json:"refusalTargetCode"`
	RefusalTargetWhy   string   `json:"refusalTargetWhy"`
	AuditSearchRevoked int      `json:"auditSearchRevoked"`
	AuditRefusalsOnly  int      `json:"auditRefusalsOnly"`
	RefusalsByCode     int      `json:"refusalsByCode"`
	// Seen as an unknown peer; by keyboard.
	UnknownSeenStatus int    `json:"unknownSeenStatus"`
	UnknownSeenError  string `json:"unknownSeenError"`
	UnknownSeenTables int    `json:"unknownSeenTables"`
	UnknownSeenFacts  int    `json:"unknownSeenFacts"`
	UnknownFieldError int    `json:"unknownFieldError"`
	KeyboardTabs      int    `json:"keyboardTabs"`
	KeyboardFocusRing string `json:"keyboardFocusRing"`
	KeyboardSeenAs    string `json:"keyboardSeenAs"`
	// Every page, at desktop and 375 px.
	Axe      map[string][]string `json:"axe"`
	Overflow map[string][]string `json:"overflow"`
	Shots    []string            `json:"shots"`
}

// TestConsoleInBrowser runs the owner's scenarios in headless Chromium
// against two real daemons (see the package comment).
func TestConsoleInBrowser(t *testing.T) {
	needBrowser(t)
	dir := here(t)
	jsdeps.Install(t, dir)
	bin := buildIfaced(t)
	shots := os.Getenv(ShotsEnv)
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "shots")
	}
	t.Logf("screenshots in %s", shots)

	alice := start(t, bin, "alice", aliceConfig)
	bob := start(t, bin, "bob", bobConfig)
	carol := start(t, bin, "carol", carolConfig)
	// A bound against a hang, not a speed bar: console.mjs takes some 40 s
	// on a quiet machine and ran past 5 min under a load of 50.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	ast, err := alice.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bst, err := bob.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Bob greets alice, has ping answered and the calendar refused.
	bob.run(t, bin, "connect", ast.Addrs[0])
	var g struct {
		ConversationID string `json:"conversation_id"`
	}
	if err := json.Unmarshal([]byte(bob.run(t, bin, "greet", ast.PeerID, "--json")), &g); err != nil || g.ConversationID == "" {
		t.Fatalf("bob's greeting: %+v, %v", g, err)
	}
	bob.run(t, bin, "invoke", ast.PeerID, "ping", "--conversation", g.ConversationID)
	if _, err := bob.c.Invoke(ctx, api.InvokeRequest{Peer: ast.PeerID, Capability: "calendar.availability", ConversationID: g.ConversationID}); err == nil {
		t.Fatal("alice answered bob's calendar request; want a refusal")
	}

	// Carol greets alice too; alice will revoke her in the browser.
	cst, err := carol.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	carol.run(t, bin, "connect", ast.Addrs[0])
	carol.run(t, bin, "greet", ast.PeerID)
	greetAsCarol, _ := json.Marshal([]string{bin, "greet", ast.PeerID, "--home", carol.home.Dir})

	before, err := alice.c.AuditEntries(ctx, g.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	loginURL := strings.TrimSpace(alice.run(t, bin, "ui", "--no-open"))
	loginPage := openedPage(t, bin, alice)
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = dir
	bundleOut := filepath.Join(t.TempDir(), "bundle.json")
	cmd.Env = append(os.Environ(), "IFACED_BUNDLE_OUT="+bundleOut, "IFACED_UI_URL="+loginURL, "IFACED_UI_PAGE="+loginPage, "IFACED_BOB="+bst.PeerID, "IFACED_BOB_FP="+bst.Fingerprint,
		"IFACED_CONVERSATION="+g.ConversationID, "IFACED_CONSOLE_SHOTS="+shots, "CHROMIUM="+chromiumPath,
		"IFACED_CAROL="+cst.PeerID, "IFACED_GREET_AS_CAROL="+string(greetAsCarol), "IFACED_AXE="+filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	started := time.Now()
	out, runErr := cmd.Output()
	t.Logf("console.mjs ran in %v", time.Since(started).Round(time.Millisecond))
	var s summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("console.mjs printed no summary (%v, %v): %s\n%s", runErr, err, out, stderr.String())
	}
	if runErr != nil {
		t.Fatalf("console.mjs: %v\n%s\nwhat it saw: %s", runErr, stderr.String(), out)
	}
	if docs := os.Getenv(DocsEnv); docs != "" {
		writeDocsPNG(t, filepath.Join(shots, "console-desktop.png"), filepath.Join(docs, "console-desktop.png"))
		writeDocsPNG(t, filepath.Join(shots, "console-phone.png"), filepath.Join(docs, "console-phone.png"))
	}

	check := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf(format, args...)
		}
	}
	// Logging in.
	_, port, _ := net.SplitHostPort(ast.API)
	check(s.LoggedIn && s.OverviewPeerID == ast.PeerID, "logged in: %v, the overview shows %q, alice is %s", s.LoggedIn, s.OverviewPeerID, ast.PeerID)
	check(len(s.Cookie) == 1 && s.Cookie[0].Name == "ifaced_ui_"+port && s.Cookie[0].HTTPOnly && s.Cookie[0].SameSite == "Strict" && s.Cookie[0].Path == "/ui/",
		"the session cookie as the browser holds it: %+v", s.Cookie)
	check(s.CodeReuseStatus == 401, "the login URL opened again: %d, want 401", s.CodeReuseStatus)
	check(s.PageLoggedIn && s.PageOverviewPeerID == ast.PeerID, "through the login page: logged in %v, the overview shows %q", s.PageLoggedIn, s.PageOverviewPeerID)
	if _, err := os.Stat(loginPage); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the login page is still there once the browser used it: %v", err)
	}
	// The peer, what it sees, and the view changing with its tier.
	check(s.PeersListBob && s.BobTierBefore == "public", "the peers page: bob listed %v, tier %q", s.PeersListBob, s.BobTierBefore)
	check(s.CalendarBefore == "shown, not eligible" && s.DiaryBefore == "hidden: not in its view", "bob's view before: calendar %q, diary %q", s.CalendarBefore, s.DiaryBefore)
	check(strings.Contains(s.GrantNotice, "professional") && s.BobTierAfter == "professional" && s.CalendarAfter == "eligible",
		"after the grant: notice %q, tier %q, calendar %q", s.GrantNotice, s.BobTierAfter, s.CalendarAfter)
	pol, err := alice.c.Policy(ctx)
	check(err == nil && pol.Disclosure["default"][bst.PeerID] == "professional", "alice's policy after the browser's grant and its forged one: %+v, %v", pol, err)
	// Pinning.
	check(s.FingerprintShown == bst.Fingerprint, "the trust page shows bob's key as %q, it is %q", s.FingerprintShown, bst.Fingerprint)
	check(strings.Contains(s.PinNotice, "2 (verified)") && strings.Contains(s.BobLevelAfterPin, "2 (verified)"), "after pinning: %q, %q", s.PinNotice, s.BobLevelAfterPin)
	if info, err := alice.c.PeerTrust(ctx, bst.PeerID); err != nil || info.Level != conditions.Verified || info.PinnedKey == "" {
		t.Errorf("bob's trust at alice after pinning: %+v, %v", info, err)
	}
	// The introduction.
	check(s.Token != "" && s.IntroStateMinted == "unused" && s.IntroStateRevoked == "revoked" && !s.TokenShownAgain,
		"the introduction: token %v, %q then %q, shown again %v", s.Token != "", s.IntroStateMinted, s.IntroStateRevoked, s.TokenShownAgain)
	intros, err := alice.c.Introductions().List(ctx)
	check(err == nil && len(intros.Issued) == 1 && intros.Issued[0].ID == s.IntroID && intros.Issued[0].State == "revoked", "alice's tokens: %+v, %v", intros, err)
	// The audit and its why.
	ac, err := alice.c.AuditEntries(ctx, g.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	// The conversation goes on while the browser looks (alice's changes
	// are pushed to bob in it): the page shows what the log held then.
	check(s.ConversationEntries >= len(before.Entries) && s.ConversationEntries <= len(ac.Entries) && s.Refusals >= 1 && s.IFP3Start == "---",
		"the conversation page: %d entries (the log had %d before, %d after), %d refusals, IFP-3 starting %q",
		s.ConversationEntries, len(before.Entries), len(ac.Entries), s.Refusals, s.IFP3Start)
	var refusal string
	for _, e := range ac.Entries {
		if e.Message != nil && e.Message.Headers.Phase == "error" && e.Direction == "sent" && refusal == "" {
			refusal = e.Message.Headers.MessageID
		}
	}
	check(s.WhyURL == "/ui/audit/why/"+refusal && s.WhyEntryShown, "the why page: %q (the refusal is %s), its entry shown %v", s.WhyURL, refusal, s.WhyEntryShown)
	var why struct {
		Decision *struct {
			Outcome    string `json:"outcome"`
			Conditions []any  `json:"conditions"`
		} `json:"decision"`
	}
	// The daemon records a decision on every answer or refusal of a
	// capability request; the page shows the one it recorded.
	if err := alice.c.GetJSON(ctx, "/v1/audit/why/"+refusal, &why); err != nil || why.Decision == nil {
		t.Fatalf("GET /v1/audit/why of the refusal %s: %v (decision %v)", refusal, err, why.Decision)
	}
	check(s.WhyDecision == "recorded" && s.WhyOutcome == why.Decision.Outcome && s.WhyConditions == max(1, len(why.Decision.Conditions)),
		"the why page shows %q %q with %d conditions (no-decision text %q); the daemon recorded %+v", s.WhyDecision, s.WhyOutcome, s.WhyConditions, s.WhyNoDecision, why.Decision)
	// The tamper-evident log: the conversation verified, its bundle
	// downloaded by the browser verifying with alice's did:key alone, and
	// the refusal's record at the leaf the bundle proves.
	check(s.ProofState == "Verified" && s.ProofCheckpoints >= 1 && s.BundleSaved && strings.HasPrefix(s.BundleName, "ifaced-audit-bundle-") && strings.HasSuffix(s.BundleName, ".json"),
		"the conversation's evidence: %q, %d checkpoints, bundle saved %v as %q", s.ProofState, s.ProofCheckpoints, s.BundleSaved, s.BundleName)
	if raw, err := os.ReadFile(bundleOut); err != nil {
		t.Errorf("the bundle the browser saved: %v", err)
	} else {
		rep, err := gossip.VerifyBundle(raw, func(d string) bool { return d == ast.DID })
		leaf := ""
		if err == nil {
			for _, r := range rep.Records {
				if r.MessageID == refusal {
					leaf = strconv.FormatInt(r.Leaf, 10)
				}
			}
		}
		check(err == nil && rep.ConversationID == g.ConversationID && len(rep.Records) >= len(before.Entries) && leaf != "",
			"the bundle the browser saved, verified with alice's did:key alone: %+v, %v (the refusal at leaf %q)", rep, err, leaf)
		check(s.InclusionState == "Verified" && s.InclusionLeaf == leaf && strings.HasPrefix(s.InclusionTree, "ifaced-audit/"),
			"the why page's inclusion: %q, leaf %q (the bundle proves %q), tree %q", s.InclusionState, s.InclusionLeaf, leaf, s.InclusionTree)
	}
	// Live events.
	check(strings.HasPrefix(s.AddNotice, "Added") && strings.Contains(s.LiveEvent, "document") && strings.Contains(s.LiveEvent, "seq ") && s.EventsGrew,
		"the live event: added %q, the overview showed %q (the list grew: %v)", s.AddNotice, s.LiveEvent, s.EventsGrew)
	// Refusals.
	check(s.ForgedCSRFStatus == 403 && strings.Contains(s.ForgedCSRFMessage, "CSRF") && strings.Contains(s.ForgedCSRFMessage, "nothing was changed"),
		"a forged CSRF token: %d %q", s.ForgedCSRFStatus, s.ForgedCSRFMessage)
	check(s.NoCookieStatus == 401 && strings.Contains(s.NoCookieMessage, "Not logged in") && !s.NoCookiePageShowsPeer && s.NoCookiePostStatus == 401,
		"without the session cookie: %d %q (shows the peer ID: %v), a POST %d", s.NoCookieStatus, s.NoCookieMessage, s.NoCookiePageShowsPeer, s.NoCookiePostStatus)
	check(len(s.PageErrors) == 0, "script errors in the pages: %q", s.PageErrors)

	// The forms show the state: after the grant, the tier granted and the
	// cap in force, so that the next click does not downgrade bob.
	check(s.GrantTierShown == "professional" && s.GrantPeerShown == bst.PeerID && s.CapMaxShown == "cool",
		"the policy form after the grant shows tier %q for %q, cap %q", s.GrantTierShown, s.GrantPeerShown, s.CapMaxShown)
	check(!strings.Contains(s.GrantNotice, "what it sees now") && strings.Contains(s.GrantNotice, "next greeting"), "the grant's notice: %q", s.GrantNotice)
	// What bob holds (the public view of his greeting) beside what he
	// would get, with the difference.
	check(s.BobHeldTier == "public" && s.CalendarHeld == "shown, not eligible" && strings.Contains(s.BobDifference, "tier: holds public, would get professional") &&
		strings.Contains(s.BobDifference, "calendar.availability: holds shown, not eligible, would get eligible"),
		"bob's page after the grant: holds %q, calendar held %q, difference %q", s.BobHeldTier, s.CalendarHeld, s.BobDifference)
	// Advice is the owner's, never the peer's.
	check(strings.Contains(s.BobAdvice, "grant it close") && !strings.Contains(strings.ToLower(s.BobAdvice), "ask the owner"), "the advice on bob's page: %q", s.BobAdvice)
	check(strings.Contains(s.IntroConfirm, "Revoke the introduction token"), "revoking a token asks first: %q", s.IntroConfirm)
	// Carol revoked, and refused everywhere.
	check(strings.Contains(s.RevokeConfirm, "Revoke trust in the key of Carol's agent"), "revoking carol asks first: %q", s.RevokeConfirm)
	check(strings.Contains(s.RevokeNotice, "messages are now refused") && strings.Contains(s.RevokeNoticeClass, "warn"),
		"the revocation's notice: %q (class %q)", s.RevokeNotice, s.RevokeNoticeClass)
	check(s.CarolRevokeButtons == 0 && s.CarolPinButton == "Pin again", "carol's trust row: %d revoke buttons, pin button %q", s.CarolRevokeButtons, s.CarolPinButton)
	check(strings.Contains(s.CarolPeersRow, "Refused") && !strings.Contains(s.CarolPeersRow, " of ") && strings.Contains(s.CarolPeersRowClass, "refused"),
		"carol's row on the peers page: %q (class %q)", s.CarolPeersRow, s.CarolPeersRowClass)
	check(strings.Contains(s.CarolRefusedNotice, "Its messages are refused") && s.CarolSeenTables == 0 && s.CarolPinAgain == 1 &&
		!strings.Contains(s.CarolPageText, "eligible") && !strings.Contains(s.CarolPageText, "sign your messages"),
		"carol's page: notice %q, %d tables of what she may use, %d pin-again forms\n%s", s.CarolRefusedNotice, s.CarolSeenTables, s.CarolPinAgain, s.CarolPageText)
	if info, err := alice.c.PeerTrust(ctx, cst.PeerID); err != nil || info.RevokedKey == "" {
		t.Errorf("carol's trust at alice after the browser revoked her: %+v, %v", info, err)
	}
	if info, err := alice.c.PeerTrust(ctx, bst.PeerID); err != nil || info.RevokedKey != "" {
		t.Errorf("bob's trust at alice after an unconfirmed revocation: %+v, %v", info, err)
	}
	// Her refused greeting, found from its live event.
	check(!s.CarolGreetingTaken && strings.Contains(s.RefusedEvent, "Carol's agent") && strings.Contains(s.RefusedEvent, "key_revoked") && s.EventsLive == "polite",
		"the refused greeting's event: taken %v, %q (aria-live %q)", s.CarolGreetingTaken, s.RefusedEvent, s.EventsLive)
	okLinks := len(s.EventLinkStatuses) > 0
	for _, st := range s.EventLinkStatuses {
		okLinks = okLinks && st == 200
	}
	check(okLinks && s.RefusalPageStatus == 200 && s.RefusalTargets == 1 && s.RefusalTargetCode == "key_revoked" && strings.Contains(s.RefusalTargetWhy, "revoked"),
		"following the event (links %q answer %v): %d, %d records marked, code %q, why %q", s.RefusedEventLinks, s.EventLinkStatuses, s.RefusalPageStatus,
		s.RefusalTargets, s.RefusalTargetCode, s.RefusalTargetWhy)
	check(s.AuditSearchRevoked >= 1 && s.AuditRefusalsOnly >= 1 && s.RefusalsByCode >= 1,
		"key_revoked found by the audit's search %d, its refusals filter %d, the refusals page by code %d", s.AuditSearchRevoked, s.AuditRefusalsOnly, s.RefusalsByCode)
	// "Seen as" an unknown peer: the refusal only.
	check(s.UnknownSeenStatus == 404 && strings.Contains(s.UnknownSeenError, "unknown peer") && s.UnknownSeenTables == 0 && s.UnknownSeenFacts == 0 && s.UnknownFieldError == 1,
		"seen as nobody: %d %q, %d tables, %d facts, %d field errors", s.UnknownSeenStatus, s.UnknownSeenError, s.UnknownSeenTables, s.UnknownSeenFacts, s.UnknownFieldError)
	// By keyboard: a few Tab presses through the skip links.
	check(s.KeyboardTabs > 0 && s.KeyboardTabs <= 4 && s.KeyboardFocusRing != "none" && strings.Contains(s.KeyboardSeenAs, "As Bob's agent"),
		"seen as by keyboard: %d Tab presses, focus outline %q, then %q", s.KeyboardTabs, s.KeyboardFocusRing, s.KeyboardSeenAs)
	// Every page: nothing wider than 375 px, no axe violation at any impact.
	for page, wide := range s.Overflow {
		check(len(wide) == 0, "at 375 px, %s has elements wider than the screen: %q", page, wide)
	}
	check(len(s.Overflow) >= 17, "the 375 px run covered %d pages", len(s.Overflow))
	for page, v := range s.Axe {
		check(len(v) == 0, "axe on %s: %q", page, v)
	}
	check(len(s.Axe) >= 34, "axe ran on %d pages", len(s.Axe))
	for _, name := range s.Shots {
		if _, err := os.Stat(filepath.Join(shots, name)); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
	if t.Failed() {
		t.Logf("console.mjs saw: %s\nalice's log:\n%s", out, alice.logTail())
	}
}

// writeDocsPNG writes docs/console.md's pictures: the screenshot with 256
// colours (Plan 9's palette, nearest colour, no dithering), which keeps
// text sharp at a fraction of the size.
func writeDocsPNG(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	img, err := png.Decode(in)
	if err != nil {
		t.Fatalf("reading %s: %v", from, err)
	}
	pal := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.Draw(pal, pal.Rect, img, img.Bounds().Min, draw.Src)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, pal); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, buf.Bytes(), 0o644); err != nil {
		t.Fatalf("writing %s: %v", to, err)
	}
	t.Logf("wrote %s (%d bytes)", to, buf.Len())
}
