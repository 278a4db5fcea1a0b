package main

import (
	"os"
	"testing"

	"github.com/ifaced/ifaced/interop/otheruser"
)

// TestMain lets this test binary serve as the second local user's
// process (interop/otheruser) when started as one.
func TestMain(m *testing.M) {
	otheruser.Main()
	code := m.Run()
	otheruser.Cleanup()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
