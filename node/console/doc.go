// Package console is the owner's console: web pages on the daemon's
// loopback control listener, under /ui/, from which the person who runs
// ifaced can answer what each peer sees of their agent and why, what the
// agent told whom and why that was allowed, and whom they pinned,
// introduced or revoked, and change policy, trust, introductions and
// capabilities. Everything is embedded in the binary (templates, one
// style sheet, one small script); nothing is fetched from elsewhere, so
// the console works offline.
//
// # A client of the control API
//
// The console holds no state of the daemon's. It is a client of the
// control API (node/api) through *api.Client, as the command line and the
// MCP endpoint are: every page reads what `ifaced status`, `peers`,
// `caps`, `policy`, `trust`, `introduce` and `audit` read, and every
// change is the API call those verbs make, so it passes the API's own
// validation and is persisted exactly as they persist it. The daemon
// mounts it with api.Server.MountUI (cmd/ifaced, `ifaced run`).
//
// # Why server-rendered pages
//
// The pages are html/template pages rendered by the daemon, with one small
// script that only adds to them (live events, copying a token, reading a
// login code from a URL fragment). This was chosen over a front-end built
// from a lock file for the long run: there is no JavaScript supply chain
// to rebuild, audit or keep patched inside the binary (npm is used only by
// the browser tests, in interop/console); html/template escapes everything
// a peer wrote by context; every page works without JavaScript; and every
// change is a plain HTML form that posts naturally, with its CSRF token as
// a hidden field.
//
// # Pages
//
// Every page has a stable URL; a page with a selection (a peer, a day, a
// search) keeps it in the query, so any view can be bookmarked.
//
//	/ui/                          overview: peer ID, did:key, fingerprint, addresses, reachability, document seq, counts (as of the page's load), recent events (live with JavaScript)
//	/ui/peers                     peers: alias or display name, level and how it was reached, what each holds and the tier and temperature it would get, last seen; refused peers marked
//	/ui/peers/{peer}[?persona=P]  one peer: what it holds beside what it would get at its next greeting, and the difference; what it sees of this agent (each capability eligible or not, what is unmet and what the owner can do); what it offers; its conversations
//	/ui/caps[?as=PEER&tier=&level=&temperature=&persona=]   the document; add (a form that writes the JSON, or the JSON) and remove; "seen as" a peer or a hypothetical context
//	/ui/caps/edit/{name}          edit one capability
//	/ui/policy[?peer=PEER&persona=&tier=&max=]  the disclosure map by persona and peer, temperature caps; grant and cap, the forms showing the peer's grant and cap
//	/ui/trust                     trust records; pin by comparing fingerprints (pin again, for a revoked key), revoke, check; introductions: mint, list, revoke
//	/ui/audit[?day=&peer=&q=&refusals=1]   the recorded conversations by day; by peer; search; refusals only (the refused messages that match, too)
//	/ui/audit/c/{conversation}    one conversation: how its records stand in the tamper-evident log (verified, pending, untracked or failed, and what that means; the checkpoints that include them); each message in IFP-3 form and as JSON, its parts (an answer, a refusal) as readable content, refusals marked, a why for each decision
//	/ui/audit/c/{conversation}/bundle  its evidence bundle, to save: the file `ifaced audit export --conversation` writes (offered once verified)
//	/ui/audit/why/{message_id}    why a capability request was answered or refused: the facts established and each condition evaluated (GET /v1/audit/why), and the decision's record in the tamper-evident log: its leaf, the day's tree and the checkpoint that includes it, or pending until the next checkpoint
//	/ui/audit/refusals[?day=&peer=&code=&q=&at=]  the record of refusals (GET /v1/audit/refusals), searched, each with why for the owner; at= (a refused event's instant) marks its record
//	/ui/events                    the recent events as server-sent events (the overview's script follows it)
//	/ui/login[?code=C]            exchanges a one-time login code for a session
//
// A peer reference (in a path, "seen as", the audit's peer) is read as the
// command line reads it for a verb that grants nothing: the owner's alias,
// a peer ID, did:key or agent ID, or the display name of exactly one known
// peer; a grant takes an alias or an ID only, since a display name is the
// peer's own claim.
//
// Changes are POSTs to the page's own URL family (/ui/caps/add,
// /ui/policy/disclosure, /ui/trust/pin, /ui/intros, …); each answers with
// a redirect to its page and a notice (post, redirect, get), or with the
// page again, its form kept, and the refusal on it, at the top and beside
// the field it concerns (aria-invalid, aria-describedby): a status of 400
// (bad input, naming the field), 404 (unknown peer, capability or token),
// 409 (a name in use) or what the API answered. Revoking (a key, a token)
// and removing (a capability, a grant, a cap) are asked twice: the form's
// post changes nothing and answers with a page saying what will follow,
// whose own form (the same fields, the CSRF token, confirm=yes) does it
// (confirm.go); plain forms, so it works without JavaScript.
//
// # What a peer holds, and what it would get
//
// A grant applies from a peer's next greeting, and a conversation keeps
// the grant it opened with, so what a peer holds and what it would be
// shown can differ. The daemon records the last view it sent each peer
// (node.Node.SentView), which GET /v1/seen answers as holds: the peer's
// page shows both side by side and lists the difference. A peer whose
// messages the door refuses (a revoked key) is shown refused on every
// page: no capability it may use, a "pin again" form instead of Revoke.
//
// # Advice is the owner's
//
// A peer's view says how to meet a condition in words written to the
// peer ("ask the owner to raise your tier"). The owner's pages say what
// the owner can do instead, with a link to where it is done ("grant it
// professional", "pin its key"; advice.go); a peer's own words, where
// shown (what it offers this agent), are quoted as its words.
//
// # Events and refusals
//
// The overview's events name peers as the owner does (alias, else display
// name) and are in an aria-live list. A refused message is recorded in the
// record of refusals, never in the conversation it names, so a refused
// event links to /ui/audit/refusals with its instant, which marks its
// record; the audit's search and refusals filter read the record too.
//
// # Layout
//
// One style sheet: a skip link first on every page (and links to a page's
// main forms, "Skip to Seen as"), a visible focus ring, headers on every
// column including actions, and below 600 px tables turned into cards
// with their actions first and no element wider than the screen
// (interop/console checks every page at 375 px, and runs axe-core on
// each).
//
// # Logging in, sessions and CSRF
//
// The API's token never appears in a URL. `ifaced ui` asks the daemon,
// with the token, for a one-time login code (POST /v1/ui/login-code):
// 32 random bytes, valid 60 seconds, usable once, at most 16 outstanding.
// It prints
//
//	http://127.0.0.1:PORT/ui/login?code=CODE
//
// to the owner's terminal, and where there is a desktop it opens the
// console through the desktop's opener, but never with that URL: an
// opener's command line can be read by every local user in /proc. The
// opener gets the path of a login page the console writes for it (mode
// 0600, in <home>/console/, removed once its code is used or expires),
// which sends the browser to /ui/login#code=CODE; see loginpage.go for
// why the code rides in the fragment there.
//
// GET /ui/login?code=CODE exchanges the code for a session and redirects
// to /ui/, so the URL left in the browser's history is a used code. (The
// login page also takes the code as #code=CODE, read by its script and
// posted, or pasted into its form.) The session is a cookie, ifaced_ui_PORT, holding
// 32 random bytes: HttpOnly, SameSite=Strict, Path=/ui/. Sessions live in
// the daemon's memory only: forgotten at a restart, ended after 12 hours
// without a request or by logging out, and at most 32 at once (a new one
// evicts the one idle longest). Every form carries the session's CSRF
// token (32 random bytes) as a hidden field, and every POST is refused
// without it (403, nothing changed).
//
// A browser sends a cookie to every port of its host, so a page served
// by another local user's web server on 127.0.0.1 can receive the
// session cookie; that user cannot replay it. On Linux the control
// listener finds, for each TCP connection, the user that owns the
// client's socket, and answers 403 to every request on a connection of
// another user than the daemon's (root excepted), the console's pages
// and its login included: node/api's peeruid.go says how, what it costs
// (a sock_diag lookup of about 13 µs per connection) and what other
// systems get (no such check).
//
// Under /ui/, the API's guard answers 421 to a Host that is not the
// listener's loopback address (DNS rebinding) and 403 to a POST whose
// Origin is present and foreign (api.Server.MountUI); this package answers
// 401 to a missing, unknown or expired session. Pages are sent with a
// Content-Security-Policy that allows only the console's own script and
// style, no framing, and a referrer for the console's own pages only
// (Referrer-Policy: same-origin; with no-referrer, Chromium sends the
// Origin of a form post as "null", which the guard refuses).
//
// # The tamper-evident log
//
// A conversation's page and a decision's why page read GET
// /v1/audit/proof, which exports the records' evidence bundle and
// verifies it as a third party would (proofs.go): the state is shown as a
// word in a box (not by colour alone) with what it means to the owner,
// and the daemon's own words when it is not verified, quoted and bounded
// (they may quote an ID a peer chose). The bundle is the owner's evidence
// (it holds the daemon's decisions), downloaded behind the session like
// every page, under a file name made of the ID's safe characters only.
//
// # What the console shows that peers never see
//
// The console is the owner's: it lists hidden capabilities and the
// standing of each for any peer (GET /v1/seen), which no peer's view
// does. Peers' own words (display names, descriptions, message text) are
// shown as text, escaped by html/template.
package console
