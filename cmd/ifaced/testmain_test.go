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
	for _, b := range builds {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}
