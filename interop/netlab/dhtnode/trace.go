package main

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// kad-dht names the peer whose GET_PROVIDERS answer carried a provider
// only in a trace event: on the span of its provider lookup
// (findProvidersAsyncRoutine), an event "found provider" with attributes
// peer (the provider) and from (who answered). tracerProvider, installed
// as OpenTelemetry's global provider, records that event for the lookups
// find marks with a lookupTrace in their context, and records nothing
// else: every other span is a no-op, as without it.

// lookupKey is the context key of a lookup's lookupTrace.
type lookupKey struct{}

// lookupTrace is, for one lookup, who answered with each provider.
type lookupTrace struct {
	mu   sync.Mutex
	from map[string]string // provider → the peer whose answer named it first
}

func (l *lookupTrace) add(provider, from string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.from[provider]; !ok {
		l.from[provider] = from
	}
}

func (l *lookupTrace) source(provider string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, ok := l.from[provider]
	return from, ok
}

// providerLookupSpan is the suffix of the name of kad-dht's span.
const providerLookupSpan = "FindProvidersAsyncRoutine"

type tracerProvider struct{ embedded.TracerProvider }

func (tracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{} }

type tracer struct{ embedded.Tracer }

func (tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	lt, _ := ctx.Value(lookupKey{}).(*lookupTrace)
	if lt == nil || !strings.HasSuffix(name, providerLookupSpan) {
		return noop.Tracer{}.Start(ctx, name, opts...)
	}
	s := &lookupSpan{lt: lt}
	return trace.ContextWithSpan(ctx, s), s
}

// lookupSpan is a no-op span but for the events it records in lt.
type lookupSpan struct {
	noop.Span
	lt *lookupTrace
}

func (s *lookupSpan) AddEvent(name string, opts ...trace.EventOption) {
	if name != "found provider" {
		return
	}
	var provider, from string
	cfg := trace.NewEventConfig(opts...)
	for _, kv := range cfg.Attributes() {
		switch kv.Key {
		case attribute.Key("peer"):
			provider = kv.Value.AsString()
		case attribute.Key("from"):
			from = kv.Value.AsString()
		}
	}
	if provider != "" && from != "" {
		s.lt.add(provider, from)
	}
}
