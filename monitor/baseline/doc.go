// Package baseline learns what a model's latency normally is, at this
// hour of this weekday, from the proxy's own measurements, and decides
// whether a recent window is above it. It is the one baseline of
// infergate: the GPU correlation's "latency up" and cause hint and the
// alert rules' baseline conditions all read a Store and decide with Up.
//
// # What is learned
//
// Each Observe brings one sample per model: the p50, p90 and p99 of its
// recent calls (seconds), and whether the model was up at that moment.
// A Store keeps, per model and quantile:
//
//   - a recent level: the median and the robust spread (1.4826 × the
//     median absolute deviation) of the last RecentSamples calm samples,
//     one kept in RecentEvery (30 minutes at one sample a second), usable
//     after MinRecent of them, so a baseline exists a minute after start
//     and a slow creep does not drag it along;
//   - a seasonal level per hour of the week (168 hours; a holiday counts
//     as a Sunday): each hour's median and spread, kept for the last
//     Weeks weeks, summarised by their medians.
//
// Samples taken while the model is up are not learned, so an incident
// does not drag its own baseline along; a level that stays up longer than
// AcceptAfter is accepted as the new normal.
//
// # Deciding
//
// Get combines the two: the level is the larger of the recent and the
// seasonal one (latency is up only when it is above what is normal now
// and what is normal at this hour of the week, so a daily peak that the
// history knows is not an incident), the spread is the hour's own once it
// has history, and the band is widened while the history is short (×2
// with no week of history, ×1.5 with one). Up
// compares a recent window against Threshold = max(level × Factor, level
// + Band × spread, level + Min), and reads the window's quantile through
// its lower confidence bound (monitor.Bounds): too few calls decide
// nothing.
//
// The clock is injectable (Options.Now) and may run faster than real time
// (Options.Scale), so tests and the bench replay weeks in seconds. Save
// and Load persist a Store as JSON so a restart keeps its history.
package baseline
