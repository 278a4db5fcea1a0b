package main

import (
	"context"

	"github.com/ifaced/ifaced/node/demo"
)

func runDemo(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "demo", "", false)
	keep := f.String("keep", "", "keep the three data directories in this directory instead of a temporary one")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("demo takes no arguments, got %q", f.Args())
	}
	return demo.Run(ctx, e.stdout, demo.Options{Dir: *keep})
}
