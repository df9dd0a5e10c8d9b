package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// referencePages are the pages `infergate docs` writes, by name; each is
// made from what the binary itself parses or registers, so the committed
// pages can be checked against it (TestReferencePagesMatchBinary).
var referencePages = []struct {
	name, file string
	write      func(io.Writer) error
}{
	{"flags", "flags.md", flagsPage},
	{"metrics", "metrics.md", metricsPage},
}

// docsCommand runs `infergate docs flags|metrics` (one page on stdout) and
// `infergate docs --out DIR` (every page into DIR, as make docs does).
func docsCommand(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("infergate docs", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: infergate docs flags|metrics   (one page on stdout)\n       infergate docs --out DIR       (every page into DIR)")
		fs.PrintDefaults()
	}
	dir := fs.String("out", "", "folder to write every reference page into (docs/reference)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *dir != "" && fs.NArg() == 0:
		for _, p := range referencePages {
			var b bytes.Buffer
			if err := p.write(&b); err != nil {
				fmt.Fprintf(errOut, "infergate docs: %s: %v\n", p.name, err)
				return 1
			}
			if err := os.WriteFile(filepath.Join(*dir, p.file), b.Bytes(), 0o644); err != nil {
				fmt.Fprintln(errOut, "infergate docs:", err)
				return 1
			}
		}
		return 0
	case *dir == "" && fs.NArg() == 1:
		for _, p := range referencePages {
			if p.name == fs.Arg(0) {
				if err := p.write(out); err != nil {
					fmt.Fprintf(errOut, "infergate docs: %s: %v\n", p.name, err)
					return 1
				}
				return 0
			}
		}
		fmt.Fprintf(errOut, "infergate docs: unknown page %q: want flags or metrics\n", fs.Arg(0))
		return 2
	}
	fs.Usage()
	return 2
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// code is s as inline code in a table cell, or nothing when s is empty.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + cell(s) + "`"
}
