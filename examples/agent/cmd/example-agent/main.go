// Command example-agent runs the example agent beside a daemon. It does
// two things:
//
//   - it serves the webhook (package agent) on a local address, which
//     answers the invocations the daemon forwards: point the daemon at it
//     with `[agent] webhook = "http://127.0.0.1:8085/"` (or `ifaced config
//     set agent.webhook http://127.0.0.1:8085/`) and add its capabilities
//     with `ifaced caps add examples/agent/capabilities.toml`;
//   - it follows the daemon's event stream (GET /v1/events, as an
//     observer, so invocations still go to the webhook) and answers a
//     peer's plain message in a conversation (`ifaced say`, phase context
//     or probe, that is no capability request) with a recommend message
//     saying what it heard and what it offers (agent.Reply), through
//     POST /v1/say. A recommend is never answered, so two such agents do
//     not talk forever.
//
// The daemon is the one of --home (else $IFACED_HOME, else ~/.ifaced); it
// need not run yet: the agent waits for it and follows it across
// restarts. docs/agents.md walks through it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ifaced/ifaced/examples/agent"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8085", "address to serve the webhook on")
	home := flag.String("home", "", "the daemon's data directory, whose events the agent follows (default $IFACED_HOME, else ~/.ifaced)")
	noFollow := flag.Bool("no-follow", false, "serve the webhook only: do not follow the daemon's events (no replies to plain messages)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := log.New(os.Stderr, "example-agent: ", log.LstdFlags)
	if !*noFollow {
		h, err := homeDir(*home)
		if err != nil {
			logger.Fatal(err)
		}
		go follow(ctx, h, logger, 2*time.Second)
	}
	srv := &http.Server{Addr: *addr, Handler: agent.Handler(nil), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	logger.Printf("webhook listening on http://%s/", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Fatal(err)
	}
}

// homeDir is the data directory as ifaced finds it.
func homeDir(flagHome string) (config.Home, error) {
	dir := flagHome
	if dir == "" {
		dir = os.Getenv(config.EnvHome)
	}
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return config.Home{}, fmt.Errorf("finding the data directory: %w", err)
		}
		dir = filepath.Join(h, ".ifaced")
	}
	return config.Home{Dir: dir}, nil
}

// answeredPhases are the phases of a peer's message the agent answers.
var answeredPhases = map[gossip.Phase]bool{gossip.PhaseContext: true, gossip.PhaseProbe: true}

// follow answers peers' plain messages until ctx ends, finding the daemon
// again every pause when it is not there or its stream ends.
func follow(ctx context.Context, h config.Home, logger *log.Logger, pause time.Duration) {
	waiting := false
	for ctx.Err() == nil {
		err := followOnce(ctx, h, logger)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, api.ErrNoDaemon) {
			if !waiting {
				logger.Printf("waiting for the daemon: %v", err)
				waiting = true
			}
		} else {
			waiting = false
			logger.Printf("the daemon's event stream ended (%v); following it again", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func followOnce(ctx context.Context, h config.Home, logger *log.Logger) error {
	c, err := api.Dial(h)
	if err != nil {
		return err
	}
	defer c.Close()
	ev, err := c.Observe(ctx)
	if err != nil {
		return err
	}
	defer ev.Close()
	stop := context.AfterFunc(ctx, func() { ev.Close() })
	defer stop()
	logger.Printf("following the daemon of %s: replying to peers' messages", h.Dir)
	for {
		e, err := ev.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("the daemon closed the stream")
		}
		if err != nil {
			return err
		}
		conv, text, ok := toAnswer(e)
		if !ok {
			continue
		}
		if _, err := c.Say(ctx, api.SayRequest{ConversationID: conv, Phase: gossip.PhaseRecommend, Text: agent.Reply(text)}); err != nil {
			logger.Printf("replying in %s: %v", conv, err) // the conversation closed meanwhile, say
			continue
		}
		logger.Printf("replied in %s", conv)
	}
}

// toAnswer tells whether an event is a peer's plain message to answer:
// received in a conversation, phase context or probe, and no capability
// request (a probe naming one is answered by its invocation, through the
// webhook). It returns the conversation and the text.
func toAnswer(e events.Event) (conversation, text string, ok bool) {
	if e.Type != events.EventMessage || e.Message == nil || e.Invocation != nil || e.ConversationID == "" {
		return "", "", false
	}
	h := e.Message.Headers
	if !answeredPhases[h.Phase] || h.Capabilities != nil && len(h.Capabilities.Request) > 0 {
		return "", "", false
	}
	return e.ConversationID, e.Message.Body.Text, true
}
