package netlab

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	removeDHTNode()
	os.Exit(code)
}
