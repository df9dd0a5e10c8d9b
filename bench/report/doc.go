// Package report renders bench results as Markdown tables and JSON.
//
// Table is a plain grid with a Markdown renderer; LoadTable turns load
// results into one. Numbers are formatted by the helpers here so every
// scenario prints latencies, rates and ratios the same way.
package report
