package alert

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"
)

// Bounds of annotation templates. The template is the operator's, but
// what it ranges over and prints can come from clients (model names are
// label values), it runs on the evaluation loop while the engine's lock
// is held, and text/template has no cancellation. So a template is
// checked when the config is (what can be seen statically) and bounded
// when it runs (what cannot).
const (
	// MaxAnnotationBytes is the most one annotation renders to; the
	// rest is cut.
	MaxAnnotationBytes = 64 << 10
	// MaxTemplateSteps bounds a template's estimated work at config
	// check: its actions, each range's body counted once per iteration
	// (a range over a literal number n times; over data
	// dataRangeEstimate times), each {{template}} call as the template
	// it calls.
	MaxTemplateSteps = 10_000
	// dataRangeEstimate is how many iterations the estimate assumes for
	// a range over data (.Labels, len of a string): labels are few and
	// short.
	dataRangeEstimate = 32
	// maxFormatWidth bounds the width and precision of printf verbs: fmt
	// builds padding in memory before anything is written, so the
	// output cap cannot stop "%0999999999d".
	maxFormatWidth = 1024
	// RenderTimeout is how long one annotation may render. One that
	// runs past it is abandoned (it cannot be stopped; its writes fail
	// from then on) and never executed again: its raw text is shown
	// instead, so a slow template costs one timeout, not one per alert
	// and evaluation.
	RenderTimeout = time.Second
	// maxAbandoned bounds the abandoned renders still running; past it
	// templates are not executed at all (raw text) until they end.
	maxAbandoned = 4
	// maxRawBytes is how much of the raw template a fallback shows.
	maxRawBytes = 1024
)

// abandoned counts renders that ran past RenderTimeout and still run.
var abandoned atomic.Int32

// annotation is one compiled annotation template.
type annotation struct {
	text string
	tmpl *template.Template
	// broken is set once a render of this template ran past
	// RenderTimeout.
	broken atomic.Bool
}

// templateFuncs replace text/template's printf with one whose widths are
// bounded.
var templateFuncs = template.FuncMap{"printf": boundedPrintf}

// parseTemplates compiles annotation templates and checks their bounds;
// errors name the annotation ("annotations.summary: ...").
func parseTemplates(ann map[string]string) (map[string]*annotation, error) {
	out := map[string]*annotation{}
	for k, v := range ann {
		t, err := template.New(k).Option("missingkey=zero").Funcs(templateFuncs).Parse(v)
		if err == nil {
			err = checkTemplate(t)
		}
		if err != nil {
			return nil, fmt.Errorf("annotations.%s: %v", k, err)
		}
		out[k] = &annotation{text: v, tmpl: t}
	}
	return out, nil
}

// checkTemplate refuses what can be seen to be too costly before it
// runs: estimated work above MaxTemplateSteps, a template that calls
// itself, a literal printf format with a width above maxFormatWidth.
func checkTemplate(t *template.Template) error {
	c := &costWalk{t: t, active: map[string]bool{}}
	steps, err := c.template(t.Name())
	if err != nil {
		return err
	}
	if steps > MaxTemplateSteps {
		return fmt.Errorf("template does about %.0f steps (ranges multiply their bodies), at most %d: a range over a literal number repeats its body that many times", steps, MaxTemplateSteps)
	}
	return nil
}

// costWalk estimates the steps of a template's parse tree.
type costWalk struct {
	t      *template.Template
	active map[string]bool // templates being walked: a call back is recursion
}

func (c *costWalk) template(name string) (float64, error) {
	if c.active[name] {
		return 0, fmt.Errorf("template %q calls itself: recursion is not allowed", name)
	}
	tt := c.t.Lookup(name)
	if tt == nil || tt.Tree == nil {
		return 0, nil // text/template reports an undefined template when it runs
	}
	c.active[name] = true
	defer delete(c.active, name)
	return c.node(tt.Tree.Root)
}

func (c *costWalk) list(l *parse.ListNode) (float64, error) {
	if l == nil {
		return 0, nil
	}
	return c.node(l)
}

func (c *costWalk) node(n parse.Node) (float64, error) {
	switch n := n.(type) {
	case *parse.ListNode:
		sum := 0.0
		for _, ch := range n.Nodes {
			s, err := c.node(ch)
			if err != nil {
				return 0, err
			}
			sum += s
		}
		return sum, nil
	case *parse.ActionNode:
		return 1, c.pipe(n.Pipe)
	case *parse.IfNode:
		return c.branch(&n.BranchNode, 1)
	case *parse.WithNode:
		return c.branch(&n.BranchNode, 1)
	case *parse.RangeNode:
		times := float64(dataRangeEstimate)
		if k, ok := literalInt(n.Pipe); ok {
			times = float64(max(k, 0))
		}
		return c.branch(&n.BranchNode, times)
	case *parse.TemplateNode:
		if err := c.pipe(n.Pipe); err != nil {
			return 0, err
		}
		s, err := c.template(n.Name)
		return 1 + s, err
	}
	return 1, nil // text, comments, break, continue
}

// branch is the cost of an if, with or range: its pipeline, its body
// times times (each iteration a step of its own), its else once.
func (c *costWalk) branch(b *parse.BranchNode, times float64) (float64, error) {
	if err := c.pipe(b.Pipe); err != nil {
		return 0, err
	}
	body, err := c.list(b.List)
	if err != nil {
		return 0, err
	}
	els, err := c.list(b.ElseList)
	return 1 + times*(1+body) + els, err
}

// pipe checks the literal formats of printf calls in p.
func (c *costWalk) pipe(p *parse.PipeNode) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		if len(cmd.Args) >= 2 {
			if id, ok := cmd.Args[0].(*parse.IdentifierNode); ok && id.Ident == "printf" {
				if s, ok := cmd.Args[1].(*parse.StringNode); ok {
					if err := checkFormat(s.Text); err != nil {
						return err
					}
				}
			}
		}
		for _, a := range cmd.Args {
			if sub, ok := a.(*parse.PipeNode); ok {
				if err := c.pipe(sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// literalInt returns n when the pipeline is the integer literal n.
func literalInt(p *parse.PipeNode) (int64, bool) {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return 0, false
	}
	num, ok := p.Cmds[0].Args[0].(*parse.NumberNode)
	if !ok || !num.IsInt {
		return 0, false
	}
	return num.Int64, true
}

// checkFormat refuses a printf format whose width or precision is above
// maxFormatWidth or comes from an argument (*).
func checkFormat(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		for _, part := range []string{"width", "precision"} {
			if part == "precision" {
				if i >= len(format) || format[i] != '.' {
					break
				}
				i++
			}
			if i < len(format) && format[i] == '[' { // an explicit argument index
				for i < len(format) && format[i] != ']' {
					i++
				}
				i++
			}
			if i < len(format) && format[i] == '*' {
				return fmt.Errorf("printf %q: a %s taken from an argument (*) is not allowed", format, part)
			}
			n := 0
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				if n = n*10 + int(format[i]-'0'); n > maxFormatWidth {
					return fmt.Errorf("printf %q: %s above %d", format, part, maxFormatWidth)
				}
				i++
			}
		}
	}
	return nil
}

// boundedPrintf is printf with checkFormat's bounds, for formats that
// come from data at run time.
func boundedPrintf(format string, args ...any) (string, error) {
	if err := checkFormat(format); err != nil {
		return "", err
	}
	return fmt.Sprintf(format, args...), nil
}

var (
	errTooLong   = fmt.Errorf("longer than %d KiB", MaxAnnotationBytes>>10)
	errAbandoned = errors.New("render abandoned")
)

// capWriter keeps at most max bytes; a write past them, or after the
// render was abandoned, fails, which stops text/template's execution.
type capWriter struct {
	mu        sync.Mutex
	buf       []byte
	max       int
	abandoned bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned {
		return 0, errAbandoned
	}
	if room := w.max - len(w.buf); len(p) > room {
		w.buf = append(w.buf, p[:room]...)
		return room, errTooLong
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *capWriter) abandon() {
	w.mu.Lock()
	w.abandoned = true
	w.mu.Unlock()
}

// render executes the annotation over data within RenderTimeout and
// MaxAnnotationBytes. Output past the cap is cut and marked; a template
// that fails, or runs past its time, renders as an error note and its raw
// text. It never blocks longer than RenderTimeout.
func (an *annotation) render(data templateData) string {
	if an.broken.Load() {
		return an.fallback(fmt.Errorf("it ran past %v before and is no longer executed", RenderTimeout))
	}
	if n := abandoned.Load(); n >= maxAbandoned {
		return an.fallback(fmt.Errorf("%d slow templates are still running", n))
	}
	w := &capWriter{max: MaxAnnotationBytes}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("panic: %v", v)
			}
		}()
		done <- an.tmpl.Execute(w, data)
	}()
	timer := time.NewTimer(RenderTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		w.mu.Lock()
		out := string(w.buf)
		w.mu.Unlock()
		switch {
		case errors.Is(err, errTooLong):
			return cutUTF8(out) + fmt.Sprintf("… (cut: annotation longer than %d KiB)", MaxAnnotationBytes>>10)
		case err != nil:
			return an.fallback(err)
		}
		return out
	case <-timer.C:
		an.broken.Store(true)
		w.abandon()
		abandoned.Add(1)
		go func() {
			<-done
			abandoned.Add(-1)
		}()
		return an.fallback(fmt.Errorf("it ran past %v and was stopped", RenderTimeout))
	}
}

// fallback is what a failed render shows: an error note and the raw
// template.
func (an *annotation) fallback(err error) string {
	raw := an.text
	if len(raw) > maxRawBytes {
		raw = cutUTF8(raw[:maxRawBytes]) + "…"
	}
	return fmt.Sprintf("(template error: %v) %s", err, raw)
}

// cutUTF8 drops a rune cut in half at the end of s.
func cutUTF8(s string) string {
	for len(s) > 0 && !utf8.ValidString(s[max(len(s)-utf8.UTFMax, 0):]) {
		s = s[:len(s)-1]
	}
	return s
}
