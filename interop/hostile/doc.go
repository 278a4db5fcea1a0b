// Package hostile is the hostile-load suite: the daemon run as its own
// process on loopback (`ifaced run`, built from cmd/ifaced), attacked by
// peers in the test process, and measured from outside — peak resident
// memory (VmHWM) and CPU time from /proc/<pid>, bytes on disk under its
// home, and what its store holds once it has stopped — while established
// peers keep greeting it.
//
// Each test is one attack a stranger can make on an open network:
//
//	TestContainerBombOverStreams      1 MiB frames of nested empty containers on many libp2p streams
//	TestContainerBombThroughTheInbox  the same as JSON, many requests at once to the HTTPS inbox
//	TestWrongKeyFlood                 900 KiB greetings signed by the wrong key; stopped, every refusal is in the record or its count
//	TestFreshKeysWithLargeViews       fresh keys greeting at once with 900 KiB views, past the strangers' share; then a new stranger
//	TestBogusIntroductionProofs       fresh keys presenting introductions the daemon never issued
//	TestSelfRevokingKeyFlood          fresh keys that greet and revoke themselves, then the owner's rotation
//	TestMailboxRegistrationFlood      fresh keys registering relay mailboxes, then a genuine peer's mail
//	TestAnnouncementFlood             GossipSub announcements of 900 KB from brand-new authors
//	TestHTTPManySourceAddresses       HTTP clients from thousands of addresses, then a new one
//	TestDNSRebindingHost              a web page's requests to the loopback binding under its own Host
//
// and asserts the bound docs/bounds.md states for it: peak RSS within
// memoryFactor × limits.max_memory_mb (short and long forms), the disk
// and store bounds, the record of refusals' (an excerpt within 2 KiB as
// written, every refusal written or counted), the strangers' share (new
// strangers are taken, the oldest strangers' files make room), and the
// established peers' greetings within establishedP95 with none failing.
//
// The suite runs only when asked, since it runs real processes under
// load: IFACED_HOSTILE=1 runs the short forms (as .ci/run does, a minute
// or two), IFACED_HOSTILE_LONG=1 the long forms (ten times the load).
package hostile
