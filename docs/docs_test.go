package docs

import (
	"bufio"
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines is the README's length limit: it is the page a new user
// reads from a fresh clone to the demo and to "in front of my server", so
// subjects go to docs/ pages instead of growing it back into a manual.
const maxReadmeLines = 350

// pages are the Markdown files whose links are checked, relative to this
// folder: the README, this folder's pages and the generated reference.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join("..", "README.md")}
	for _, pattern := range []string{"*.md", filepath.Join("reference", "*.md")} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// inlineLink matches a Markdown inline link or image, [text](target) or
// [text](target "title"); the text may hold one level of brackets and
// backquotes ([`deploy/Dockerfile`](../deploy/Dockerfile)).
var inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// refDefinition matches a reference-style link definition: [name]: target.
var refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)

// codeSpan matches inline code, where brackets are not links.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

type link struct {
	line   int
	target string
}

// links returns the link targets of a Markdown page with their line
// numbers, outside fenced code blocks and code spans.
func links(data []byte) []link {
	var out []link
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = append(out, link{n, m[1]})
			continue
		}
		// Brackets in code are not links ("`[not](x)`"), and code in a
		// link's text ("[`x`](x)") must not hide it: blank the spans out,
		// keeping every offset, and read the targets from the line.
		text := codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			return strings.Repeat("x", len(s))
		})
		for _, idx := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
			out = append(out, link{n, line[idx[2]:idx[3]]})
		}
	}
	return out
}

// local reports whether target is a relative link into the repository,
// and returns its path without the anchor or query.
func local(target string) (string, bool) {
	if strings.HasPrefix(target, "#") || strings.HasPrefix(target, "/") {
		return "", false
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "", false
	}
	p, err := url.PathUnescape(u.Path)
	if err != nil || p == "" {
		return "", false
	}
	return p, true
}

// TestRelativeLinksExist fails for every relative link in README.md and
// docs/ whose file or folder does not exist, so a page moved or renamed
// cannot leave readers at a dead link.
func TestRelativeLinksExist(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(data) {
			p, ok := local(l.target)
			if !ok {
				continue
			}
			checked++
			target := filepath.Join(filepath.Dir(page), filepath.FromSlash(p))
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", filepath.Join("docs", page), l.line, l.target, filepath.Join("docs", target))
			}
		}
	}
	// The README alone links every docs page; finding none means the
	// parser broke, not that the pages are fine.
	if checked < 20 {
		t.Errorf("found only %d relative links: the link parser misses them", checked)
	}
}

// TestReadmeLength fails when README.md passes maxReadmeLines.
func TestReadmeLength(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	if n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move a subject to a page in docs/ and link it", n, maxReadmeLines)
	}
}

// TestLinkParser checks the parser on the forms the pages use, so that a
// change to it cannot silently stop finding links.
func TestLinkParser(t *testing.T) {
	page := "see [a](a.md#x), [`b/c`](../b/c \"t\") and ![img](i.png);\n" +
		"`[not](code.md)` and <https://example.com>, [web](https://example.com/x.md)\n" +
		"```sh\n[fenced](f.md)\n```\n" +
		"[ref]: ../r.md\n" +
		"| [`deploy/Dockerfile`](../deploy/Dockerfile) | x |\n"
	var got []string
	for _, l := range links([]byte(page)) {
		got = append(got, l.target)
	}
	want := []string{"a.md#x", "../b/c", "i.png", "https://example.com/x.md", "../r.md", "../deploy/Dockerfile"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links: got %q, want %q", got, want)
	}
	for target, wantLocal := range map[string]string{"a.md#x": "a.md", "../b/c": "../b/c", "#anchor": "", "https://example.com/x.md": "", "mailto:a@b": "", "a%20b.md": "a b.md"} {
		p, ok := local(target)
		if p != wantLocal || ok != (wantLocal != "") {
			t.Errorf("local(%q) = %q, %v; want %q", target, p, ok, wantLocal)
		}
	}
}

// TestArchitectureNamesExist: every file architecture.md names exists,
// and every function its tables name is declared in the file beside it,
// so the walk through a call cannot point at code that moved.
func TestArchitectureNamesExist(t *testing.T) {
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	file := regexp.MustCompile("`([a-z0-9_/]+\\.go)`")
	row := regexp.MustCompile("^\\|[^|]*\\| `([a-z0-9_/]+\\.go)` \\| `([A-Za-z]+)` \\|$")
	rows := 0
	for n, line := range strings.Split(string(data), "\n") {
		for _, m := range file.FindAllStringSubmatch(line, -1) {
			if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
				t.Errorf("architecture.md:%d: %s does not exist", n+1, m[1])
			}
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		src, err := os.ReadFile(filepath.Join("..", m[1]))
		if err != nil {
			continue // reported above
		}
		decl := regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + m[2] + `[\[(]`)
		if !decl.Match(src) {
			t.Errorf("architecture.md:%d: %s declares no function %s", n+1, m[1], m[2])
		}
	}
	if rows < 10 {
		t.Errorf("architecture.md: %d decision rows read, want the table of where each decision lives", rows)
	}
}
