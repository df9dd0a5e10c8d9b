// Package grow sizes slices that are filled up to a known bound: rings of
// samples and sets of kept calls, of which a process holds thousands.
package grow

// Capped returns s with room for one more element when it has none: its
// capacity doubled (at least least), never past limit. append and
// slices.Grow round a capacity up to the allocator's size class, so a
// ring of 300 took room for 512; the copy made here has exactly the
// capacity asked. s must be shorter than limit.
func Capped[T any](s []T, least, limit int) []T {
	if len(s) < cap(s) {
		return s
	}
	c := make([]T, len(s), min(max(2*len(s), least), limit))
	copy(c, s)
	return c
}
