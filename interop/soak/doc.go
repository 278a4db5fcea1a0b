// Package soak is the long-running test: one `ifaced run` process on
// loopback (the interop/hostile harness starts it, with a webhook agent
// in the test process), driven for a configurable time by peers that come
// and go as they do on an open network, and measured from outside the
// whole time.
//
// The peers are daemons of this module (node.New) in the test process.
// Six steady peers stay: each greets and invokes every fifteen seconds
// (under the ten messages a minute a cool conversation is allowed), and
// their latencies are the run's latency curve. Strangers churn: a new one
// every few seconds connects, greets, invokes `echo` (answered by the
// agent), says something, and then closes the conversation politely, or
// disappears without a word, or (one in four) stops, rotates its key with
// `keys.RotateKey`, comes back under the new key, greets and invokes
// again, and goes. Each stranger's home is removed when it has gone.
//
// Every sample (each five seconds) reads, from outside the daemon: its
// resident memory (/proc/<pid>/status VmRSS, and RssAnon: the part that
// is not the store's mapped file, whose pages grow with the store as disk
// caps allow), its open descriptors
// (/proc/<pid>/fd), the bytes under its home, and from its Prometheus
// endpoint (the `[metrics] listen` address, as a scraper would) the Go
// heap in use and the goroutine count.
//
// The warm-up lasts a fifth of the run and until 80 strangers have come
// and gone: until then the audit log's set of held files (the 64 peers
// most recently written, two descriptors each) fills by design. After it the curves must be flat: the Theil-Sen
// slope (the median of the slopes between every pair of samples, which a
// GC's sawtooth or a burst of connections does not move) of each stays
// under its stated bound: goroutines 1 a minute, descriptors 0.5 a
// minute, anonymous resident memory and Go heap in use 64 KiB per
// stranger that came and went. Memory is bounded per stranger, not flat,
// because the caches strangers fill (held views 8 MiB, peer records
// 8 MiB, sent views and trust records 4 MiB each) take some 1,600
// strangers to fill, and until then grow by design, by 13 to 30 KiB a
// stranger as measured; the hour-long form, run past that, shows the
// curve flat (docs/soak.md). A leak of one goroutine or descriptor per
// stranger breaks its bound in the five-minute form, as does one of a
// connection's buffers. Disk is not flat
// by design (the audit log records every message, within its quota); the
// test reports the bytes per stranger and per second. Every greeting and
// invocation must succeed, steady and stranger alike.
//
// The test runs only when asked: IFACED_SOAK=5m (as .ci/run does, with
// IFACED_SOAK_EVERY=2s) or any Go duration; IFACED_SOAK_EVERY sets the
// stranger interval (5 s by default; the warm-up needs 80 strangers, so a
// short run needs a short interval); IFACED_SOAK_OUT names a file for the
// samples as CSV (the figures in docs/soak.md), each with the bytes the
// daemon's bounded memories are counted as and their entries (its
// ifaced_memory_cache_* metrics), so that a curve that still grows can
// be told apart from a memory still filling.
package soak
