package load

// RunWithClock exposes runWithClock to the external tests.
var RunWithClock = runWithClock
