package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/ifaced/ifaced/node"
)

// What the tamper-evident audit log (docs/audit.md) adds to a warm
// greeting, against the same run's warm greeting:
//
//	audit.greeting_cpu   the CPU of one warm greeting, both daemons (they run in this process), the log tamper-evident
//	audit.proof_cpu      the CPU the log's proofs add to it: hashing each record of the greeting and appending its
//	                     leaf (timed on the greeting's own records), and the checkpoints, amortized at the run's rate
//	audit.proof_cpu_ab   the same, measured instead as the difference with a pair whose log is not tamper-evident
//	                     (interleaved blocks; a cross-check, noisy at this size)
//	audit.record_disk    the bytes a warm greeting writes to the audit log (.jsonl and .md, both daemons)
//	audit.proof_disk     the bytes the proofs add (tree files, checkpoints, the log's own records)
//
// with the ratios audit.proof_cpu/audit.greeting_cpu and
// audit.proof_disk/audit.record_disk, whose targets are 5 %. A warm
// greeting's records are the smallest a greeted peer writes (a first
// greeting carries the views), so the disk ratio is its worst case.

// proofRows measures those rows with n greetings on two fresh pairs, one
// whose log is tamper-evident (the default) and one whose log is not.
func proofRows(ctx context.Context, root string, n int) ([]row, []ratioSpec) {
	ratios := []ratioSpec{{"audit.proof_cpu", "audit.greeting_cpu"}, {"audit.proof_disk", "audit.record_disk"}}
	fail := func(err error) ([]row, []ratioSpec) {
		return []row{failed("audit.proof_cpu", "tamper-evident audit log: CPU added per warm greeting", err)}, nil
	}
	p, err := newWarmPair(ctx, root, node.SyncInterval)
	if err != nil {
		return fail(fmt.Errorf("the pair with proofs: %w", err))
	}
	defer p.close()
	off, err := newWarmPair(ctx, root, node.SyncInterval, node.WithAuditOptions(gossip.WithSigner(nil)))
	if err != nil {
		return fail(fmt.Errorf("the pair without proofs: %w", err))
	}
	defer off.close()
	// Warmed alike before anything is counted.
	for range 20 {
		for _, q := range []*warmPair{p, off} {
			if _, err := q.query(ctx); err != nil {
				return fail(err)
			}
		}
	}

	// The run: blocks of greetings on each pair in turn, timing the
	// process's CPU; the proofs' disk counted on p over its blocks.
	beforeRec, beforeProof := auditBytes(p.alice.home, p.bob.home)
	const block = 20
	var on, without []float64
	elapsed, done := time.Duration(0), 0
	for round := 0; done < n && ctx.Err() == nil; round++ {
		order := []*warmPair{p, off}
		if round%2 == 1 {
			order = []*warmPair{off, p} // neither always first
		}
		for _, q := range order {
			start, err := cpuTime()
			if err != nil {
				return fail(err)
			}
			t0 := time.Now()
			for range block {
				if _, err := q.query(ctx); err != nil {
					return fail(err)
				}
			}
			end, err := cpuTime()
			if err != nil {
				return fail(err)
			}
			per := float64(end-start) / block / 1e3 // µs
			if q == p {
				on, elapsed = append(on, per), elapsed+time.Since(t0)
			} else {
				without = append(without, per)
			}
		}
		done += block
	}
	if len(on) == 0 {
		return []row{notMeasured("audit.proof_cpu", "tamper-evident audit log: CPU added per warm greeting", "interrupted")}, nil
	}
	// What the checkpoints wrote is on disk once each daemon signs one.
	for _, d := range []*daemon{p.alice, p.bob} {
		if err := d.Audit().Checkpoint(); err != nil {
			return fail(err)
		}
	}
	afterRec, afterProof := auditBytes(p.alice.home, p.bob.home)
	greetings := float64(len(on) * block)
	recDisk, proofDisk := float64(afterRec-beforeRec)/greetings, float64(afterProof-beforeProof)/greetings

	// The proofs' own work, timed on the records of one greeting: hashing
	// each and appending its leaf to a tree, and a checkpoint.
	recs, err := lastRecords(p.alice.home, 2)
	if err != nil {
		return fail(err)
	}
	bobRecs, err := lastRecords(p.bob.home, 2)
	if err != nil {
		return fail(err)
	}
	recs = append(recs, bobRecs...)
	hashCPU, cpCPU, err := proofWork(root, recs, p.alice)
	if err != nil {
		return fail(err)
	}
	rate := greetings / elapsed.Seconds()
	// Each daemon signs at most one checkpoint per CheckpointEvery while
	// greetings flow: 2 × its CPU over the greetings of that time.
	cpPer := 2 * cpCPU / (rate * gossip.CheckpointEvery.Seconds())
	if cpPer > 2*cpCPU {
		cpPer = 2 * cpCPU // slower than one greeting per interval: a checkpoint each
	}
	added := hashCPU + cpPer
	medOn, medOff := median(on), median(without)
	note := fmt.Sprintf("%d records of %.1f KB hashed and appended: %.1f µs; a checkpoint (flush, fsync, sign, write): %.0f µs of CPU, at %.0f greetings/s one per %s per daemon: %.2f µs a greeting",
		len(recs), float64(totalLen(recs))/1024/float64(len(recs)), hashCPU, cpCPU, rate, gossip.CheckpointEvery, cpPer)
	rows := []row{
		{key: "audit.greeting_cpu", name: "warm greeting: CPU of both daemons (tamper-evident log)", unit: unitMicros, value: medOn, base: "-",
			note: fmt.Sprintf("median of %d blocks of %d QueryCapabilities, this process's getrusage", len(on), block)},
		{key: "audit.proof_cpu", name: "tamper-evident log: CPU added per warm greeting", unit: unitMicros, value: added, base: "-", note: note},
		{key: "audit.proof_cpu_ab", name: "the same, as the difference with a log that is not tamper-evident", unit: unitMicros, value: medOn - medOff, base: "-",
			note: fmt.Sprintf("%.0f µs with proofs, %.0f µs without (medians of interleaved blocks; a cross-check, within the machine's noise)", medOn, medOff)},
		{key: "audit.record_disk", name: "warm greeting: audit records written (.jsonl and .md, both daemons)", unit: unitKB, value: recDisk / 1024, base: "-",
			note: "bytes, not blocks; a warm greeting's records are the smallest a greeted peer writes"},
		{key: "audit.proof_disk", name: "tamper-evident log: disk added per warm greeting", unit: unitKB, value: proofDisk / 1024, base: "-",
			note: "tree files, checkpoints and the log's own records, bytes per greeting over the run"},
	}
	return rows, ratios
}

// auditBytes sums the bytes of the audit logs of homes: the records
// (.jsonl and .md of peers and refusals) and the proofs (the trees'
// files, the checkpoints, the log's own records).
func auditBytes(homes ...string) (records, proofs int64) {
	for _, h := range homes {
		filepath.WalkDir(filepath.Join(h, "audit"), func(path string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			info, err := de.Info()
			if err != nil {
				return nil
			}
			name := de.Name()
			switch {
			case strings.HasPrefix(name, "_tree.") || name == auditproof.CheckpointsFile || name == "_log.jsonl":
				proofs += info.Size()
			case strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".md"):
				records += info.Size()
			}
			return nil
		})
	}
	return records, proofs
}

// lastRecords are the last k lines of the newest peer file of a home's
// audit log: a greeting's records.
func lastRecords(home string, k int) ([][]byte, error) {
	files, _ := filepath.Glob(filepath.Join(home, "audit", "*", "12D3KooW*.jsonl"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no peer file in %s", home)
	}
	slices.Sort(files)
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
	if len(lines) < k {
		return nil, fmt.Errorf("%s has %d records, want %d", files[len(files)-1], len(lines), k)
	}
	return lines[len(lines)-k:], nil
}

func totalLen(recs [][]byte) int {
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	return n
}

// proofWork times, in this process's CPU, hashing and appending recs to a
// scratch tree (per greeting: all of recs), and one checkpoint of it
// signed by d's key.
func proofWork(root string, recs [][]byte, d *daemon) (perGreeting, checkpoint float64, err error) {
	dir, err := os.MkdirTemp(root, "tree-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	t, err := auditproof.OpenTree(dir, nil)
	if err != nil {
		return 0, 0, err
	}
	defer t.Close()
	const rounds = 5000
	start, err := cpuTime()
	if err != nil {
		return 0, 0, err
	}
	var off int64
	for range rounds {
		for i, r := range recs {
			if _, err := t.Append(fmt.Sprintf("peer-%d", i%2), off, len(r), auditproof.LeafHash(r)); err != nil {
				return 0, 0, err
			}
			off += int64(len(r)) + 1
		}
	}
	end, err := cpuTime()
	if err != nil {
		return 0, 0, err
	}
	perGreeting = float64(end-start) / rounds / 1e3
	const cps = 50
	start, _ = cpuTime()
	for i := range cps {
		if _, err := t.Append("peer-0", off, 1, auditproof.LeafHash([]byte{byte(i)})); err != nil {
			return 0, 0, err
		}
		off += 2
		size, root, err := t.Flush()
		if err != nil {
			return 0, 0, err
		}
		if err := t.Sync(); err != nil {
			return 0, 0, err
		}
		note, err := auditproof.Sign(auditproof.Checkpoint{Origin: auditproof.Origin("2026-01-01"), Size: size, Root: root, Time: time.Now()}, d.id)
		if err != nil {
			return 0, 0, err
		}
		if err := t.AppendCheckpoint(note); err != nil {
			return 0, 0, err
		}
	}
	end, _ = cpuTime()
	return perGreeting, float64(end-start) / cps / 1e3, nil
}

func median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return c[len(c)/2]
}
