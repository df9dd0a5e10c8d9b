package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// yamlBlock is a fenced YAML block of a Markdown page.
var yamlBlock = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// TestDocsConfigExamplesDecode decodes every YAML block of docs/*.md and
// the README that is an infergate config (its first key is one of the
// config file's own) with the strict decoder infergate uses: a user who
// copies an example gets no "unknown field". Blocks of other files
// (simserver models, rules files, Kubernetes objects) are left out by
// that first key; a block that is a part of a config on purpose says so
// with a "# part of" comment on its first line.
func TestDocsConfigExamplesDecode(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	pages = append(pages, filepath.Join("..", "..", "README.md"))
	top := topKeys(reflect.TypeFor[Config]())
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			block := m[1]
			first := strings.TrimSpace(strings.SplitN(block, "\n", 2)[0])
			key, _, _ := strings.Cut(first, ":")
			if strings.HasPrefix(first, "# part of") || strings.Contains(block, "...") {
				continue
			}
			if !top[key] {
				continue
			}
			f := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(f, []byte(block), 0o600); err != nil {
				t.Fatal(err)
			}
			checked++
			if _, err := loadFile(f); err != nil {
				t.Errorf("%s, YAML block %d: %v\n%s", filepath.Base(page), i+1, err, block)
			}
		}
	}
	if checked < 5 {
		t.Errorf("checked %d config examples; the pages have more (is the block pattern still right?)", checked)
	}
	t.Logf("%d config examples decoded", checked)
}

// topKeys are the YAML keys of a struct's fields, inline ones' included.
func topKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			for k := range topKeys(f.Type) {
				out[k] = true
			}
		case name != "":
			out[name] = true
		}
	}
	return out
}
