package main

import (
	"context"
	"fmt"
)

// component is one part of the running process with a start and a stop.
// start returns once the component runs (its loops on goroutines of their
// own); stop returns once it stopped.
type component struct {
	name  string
	start func() error
	stop  func()
}

// components start in the order added and stop in the reverse order: what
// starts last (the listeners) stops first, so nothing stops while a part
// started after it still uses it. The order is the code's, not a comment's.
type components struct {
	list    []component
	started int
}

func (cs *components) add(name string, start func() error, stop func()) {
	cs.list = append(cs.list, component{name: name, start: start, stop: stop})
}

// loop adds a component that runs fn until its stop, which waits for fn
// to return.
func (cs *components) loop(name string, fn func(ctx context.Context)) {
	var cancel context.CancelFunc
	var done chan struct{}
	cs.add(name, func() error {
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() {
			defer close(done)
			fn(ctx)
		}()
		return nil
	}, func() {
		cancel()
		<-done
	})
}

// startAll starts the components in order; when one fails, those started
// stop, in reverse, and the error names the one that failed.
func (cs *components) startAll() error {
	for _, c := range cs.list[cs.started:] {
		if c.start != nil {
			if err := c.start(); err != nil {
				cs.stopAll()
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		cs.started++
	}
	return nil
}

// stopAll stops the started components, last started first. It may be
// called more than once.
func (cs *components) stopAll() {
	for ; cs.started > 0; cs.started-- {
		if c := cs.list[cs.started-1]; c.stop != nil {
			c.stop()
		}
	}
}
