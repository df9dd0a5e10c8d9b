package report

import (
	"strings"
)

// Table is a titled grid of pre-formatted cells.
type Table struct {
	// Title, when set, is printed as a "### " heading above the table.
	Title string
	// Header names the columns; rows shorter than the header are padded.
	Header []string
	// Rows hold the cells; a "|" inside a cell is escaped.
	Rows [][]string
	// LeftCols is how many leading columns are left-aligned (labels); the
	// rest are right-aligned numbers. Zero means 1.
	LeftCols int
	// Notes are printed as lines below the table.
	Notes []string
}

// Markdown renders t as a GitHub-flavoured Markdown table with padded
// columns, so it also reads well as plain text.
func (t Table) Markdown() string {
	left := t.LeftCols
	if left == 0 {
		left = 1
	}
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	cell := func(row []string, i int) string {
		if i < len(row) {
			return strings.ReplaceAll(row[i], "|", `\|`)
		}
		return ""
	}
	width := make([]int, ncol)
	for i := range ncol {
		width[i] = max(3, len(cell(t.Header, i)))
		for _, r := range t.Rows {
			width[i] = max(width[i], len(cell(r, i)))
		}
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString("### " + t.Title + "\n\n")
	}
	line := func(row []string) {
		b.WriteString("|")
		for i := range ncol {
			c := cell(row, i)
			pad := strings.Repeat(" ", width[i]-len(c))
			if i < left {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i := range ncol {
		if i < left {
			b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			b.WriteString(n + "\n")
		}
	}
	return b.String()
}
