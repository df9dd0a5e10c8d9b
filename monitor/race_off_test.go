//go:build !race

package monitor

// raceEnabled reports whether the test binary was built with -race, which
// changes what allocates.
const raceEnabled = false
