package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (servers, readiness probes, alert loops).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
