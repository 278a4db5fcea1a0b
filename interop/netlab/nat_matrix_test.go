package netlab

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// anchor is the success rate of DCUtR measured in the wild: 70 % ± 7 %
// of 4.4 M attempts across 167 countries, TCP and QUIC alike, 97.6 % of
// the successes on the first attempt (Trautwein et al., 2025).
const anchor = "70 % ± 7 % (Trautwein et al., 2025: 4.4 M DCUtR attempts; 97.6 % of successes on the first attempt)"

// matrixCell is one cell of the NAT matrix and what its attempts gave.
type matrixCell struct {
	NAT        NATType         `json:"nat"` // both routers'
	Behaviour  RouterBehaviour `json:"router"`
	Transport  string          `json:"transport"` // a's and b's only transport, and the relay address's
	Attempts   int             `json:"attempts"`
	Direct     int             `json:"direct"`
	FirstRound int             `json:"direct_in_first_round"`
	Delivered  int             `json:"messages_delivered"`
	ToDirect   Percentiles     `json:"time_to_direct"`
	Each       []attempt       `json:"each"`
}

func (c matrixCell) name() string {
	return fmt.Sprintf("%s/%s %s %s", c.NAT, c.NAT, c.Behaviour, c.Transport)
}

// TestNATMatrix: hole punching between a and b behind two routers of the
// same NAT type, per NAT type (endpoint-independent, address-dependent,
// symmetric), router behaviour (drop, reject) and transport (TCP only,
// QUIC only: the daemons listen on it alone and reserve on the relay's
// address on it), with greetings made as soon as the daemons start. Per
// cell: success rate (direct within the first try of three DCUtR rounds),
// median time from the greeting to the direct connection, the share of
// successes in the first round, beside the anchor from the wild. Every
// attempt then sends a message, which must arrive (directly or through
// the relay).
//
// The short form (IFACED_LAB=1, CI) makes 2 attempts per cell, the long
// form (IFACED_LAB_LONG=1) 10. Both require the endpoint-independent cells
// to meet issue 27's bar, direct in at least 9 attempts of 10 (directBar:
// each cell, and all of them together), and no symmetric attempt to
// connect directly; the address-dependent cells are reported (their
// mapping changes with the destination, so the address the relay saw is
// not the one a connection to the peer leaves from, and they behave as
// symmetric ones do). The bar is a rate, which 2 attempts cannot measure:
// the short form lets a cell miss one of its 2 (a cell that cannot punch
// gives 0), and its four endpoint-independent cells together 1 of 8; the
// long form measures the rate. It was "every attempt" until 2026-11-30,
// stricter than the issue, when the long form gave 9 of 10 in the
// reject-TCP cell (rounds held 5 s, cause open; docs/netlab.md).
func TestNATMatrix(t *testing.T) {
	l := newNATLab(t)
	ctx := context.Background()
	n := 2
	if Long() {
		n = 10
	}
	var cells []matrixCell
	for _, nat := range []NATType{NATEndpointIndependent, NATAddressDependent, NATSymmetric} {
		for _, beh := range []RouterBehaviour{RouterDrop, RouterReject} {
			for _, tr := range []string{"tcp", "quic"} {
				c := matrixCell{NAT: nat, Behaviour: beh, Transport: tr, Attempts: n}
				// A subtest per cell, so that -run picks cells
				// (TestNATMatrix/eim-reject-tcp); its verdicts are
				// the parent's, below, with the figures of all.
				if !t.Run(fmt.Sprintf("%s-%s-%s", nat, beh, tr), func(t *testing.T) {
					l.setCell(natCell{A: nat, B: nat, Behaviour: beh})
					// The attempts run two at a time (each pair of daemons
					// on ports of its own, counted apart by the routers).
					o := punchOpts{transports: []string{tr}, relay: tr, wait: 60 * time.Second, message: true}
					ports := l.reserve(n)
					c.Each = make([]attempt, n)
					t.Run("attempts", func(t *testing.T) {
						for i, port := range ports {
							t.Run(fmt.Sprint(i+1), func(t *testing.T) {
								t.Parallel()
								c.Each[i] = l.punch(ctx, t, port, o)
							})
						}
					})
					var to []time.Duration
					for _, at := range c.Each {
						if at.Delivered {
							c.Delivered++
						}
						if at.Direct {
							c.Direct++
							to = append(to, at.ToDirect)
							if at.FirstRound {
								c.FirstRound++
							}
						}
					}
					c.ToDirect = Summarize(to)
					t.Logf("%-22s direct %2d/%d (%3.0f %%), first round %d/%d, time to direct p50 %.0f ms (max %.0f ms), messages %d/%d",
						c.name(), c.Direct, n, 100*float64(c.Direct)/float64(n), c.FirstRound, c.Direct, c.ToDirect.P50, c.ToDirect.Max, c.Delivered, n)
				}) || c.Each == nil {
					continue
				}
				cells = append(cells, c)
			}
		}
	}
	t.Logf("anchor: %s", anchor)
	WriteFigures(t, map[string]any{"anchor": anchor, "cells": cells})
	var eiDirect, eiAttempts int
	for _, c := range cells {
		if c.NAT == NATEndpointIndependent {
			eiDirect += c.Direct
			eiAttempts += c.Attempts
		}
	}
	if eiAttempts > 0 && eiDirect < directBar(eiAttempts) {
		t.Errorf("endpoint-independent cells together: direct %d times in %d, want at least %d (issue 27: 9 of 10)", eiDirect, eiAttempts, directBar(eiAttempts))
	}
	for _, c := range cells {
		if c.Delivered != c.Attempts {
			t.Errorf("%s: %d messages of %d arrived", c.name(), c.Delivered, c.Attempts)
		}
		switch c.NAT {
		case NATEndpointIndependent:
			if c.Direct < directBar(c.Attempts) {
				t.Errorf("%s: direct %d times in %d, want at least %d (issue 27: 9 of 10)", c.name(), c.Direct, c.Attempts, directBar(c.Attempts))
			}
		case NATSymmetric:
			if c.Direct != 0 {
				t.Errorf("%s: %d direct connections through symmetric NATs: the lab's NAT is not symmetric", c.name(), c.Direct)
			}
		}
	}
}

// directBar is the fewest direct connections in n attempts that meet
// issue 27's bar of 9 in 10: 90 %, rounded down, and never more than all
// but one (2 attempts: 1; 8: 7; 10: 9; 40: 36).
func directBar(n int) int { return min(n-1, n*9/10) }
