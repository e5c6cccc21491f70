package wjs

import (
	"container/heap"
	"errors"
	"time"

	"github.com/dop251/goja"
)

// The event loop: after the program's top level has run, the child runs
// what it left to do, as Node does: the callbacks of fs's callback forms
// and setImmediate first, in order, then timers by when they are due
// (ties in the order they were set), until nothing is left. Promise jobs
// run after each callback (goja runs them when control leaves the
// runtime). The command's timeout bounds it all: a program that keeps an
// interval running is stopped by it, like one that loops.

// maxTimers bounds the timers and immediates waiting at once.
const maxTimers = 100_000

// task is one callback the loop will call.
type task struct {
	id       int64
	due      time.Time
	interval time.Duration // > 0: a setInterval, set again after each call
	fn       goja.Callable
	args     []goja.Value
	index    int // in the heap, -1 when not in it
}

type timerHeap []*task

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].id < h[j].id
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

type loop struct {
	seq        int64
	timers     timerHeap
	byID       map[int64]*task
	immediates []*task
	// unhandled holds the rejected promises no handler has taken yet.
	unhandled map[*goja.Promise]struct{}
}

var errTooManyTimers = errors.New("too many timers waiting at once (100000)")

// installLoop gives the program setTimeout, setInterval, setImmediate,
// their clear functions and queueMicrotask, and tracks promise rejections
// nothing handles.
func (c *child) installLoop() {
	vm := c.vm
	c.loop = loop{byID: map[int64]*task{}, unhandled: map[*goja.Promise]struct{}{}}
	vm.SetPromiseRejectionTracker(func(p *goja.Promise, op goja.PromiseRejectionOperation) {
		if op == goja.PromiseRejectionReject {
			c.loop.unhandled[p] = struct{}{}
		} else {
			delete(c.loop.unhandled, p)
		}
	})
	timer := func(repeat bool) func(call goja.FunctionCall) goja.Value {
		return func(call goja.FunctionCall) goja.Value {
			fn, ok := goja.AssertFunction(call.Argument(0))
			if !ok {
				c.throw("the \"callback\" argument must be a function")
			}
			ms := call.Argument(1).ToFloat()
			if !(ms >= 1) || ms > 1<<31-1 { // NaN, below 1 or past Node's bound: 1 ms
				ms = 1
			}
			var args []goja.Value
			if len(call.Arguments) > 2 {
				args = append(args, call.Arguments[2:]...)
			}
			t := c.addTask(fn, args)
			d := time.Duration(ms * float64(time.Millisecond))
			t.due = time.Now().Add(d)
			if repeat {
				t.interval = d
			}
			heap.Push(&c.loop.timers, t)
			return vm.ToValue(t.id)
		}
	}
	clear := func(call goja.FunctionCall) goja.Value {
		id := call.Argument(0).ToInteger()
		if t, ok := c.loop.byID[id]; ok {
			delete(c.loop.byID, id)
			if t.index >= 0 {
				heap.Remove(&c.loop.timers, t.index)
			}
			t.fn = nil // an immediate already queued is skipped
		}
		return goja.Undefined()
	}
	_ = vm.Set("setTimeout", timer(false))
	_ = vm.Set("setInterval", timer(true))
	_ = vm.Set("setImmediate", func(call goja.FunctionCall) goja.Value {
		fn, ok := goja.AssertFunction(call.Argument(0))
		if !ok {
			c.throw("the \"callback\" argument must be a function")
		}
		var args []goja.Value
		if len(call.Arguments) > 1 {
			args = append(args, call.Arguments[1:]...)
		}
		return vm.ToValue(c.immediate(fn, args).id)
	})
	for _, name := range []string{"clearTimeout", "clearInterval", "clearImmediate"} {
		_ = vm.Set(name, clear)
	}
	microtask, err := vm.RunString(`(function (fn) {
		if (typeof fn !== "function") throw new TypeError('the "callback" argument must be a function');
		Promise.resolve().then(function () { fn(); });
	})`)
	if err != nil {
		panic(err)
	}
	_ = vm.Set("queueMicrotask", microtask)
}

// addTask registers a callback under a new id.
func (c *child) addTask(fn goja.Callable, args []goja.Value) *task {
	if len(c.loop.byID) >= maxTimers {
		panic(c.vm.NewGoError(errTooManyTimers))
	}
	c.loop.seq++
	t := &task{id: c.loop.seq, fn: fn, args: args, index: -1}
	c.loop.byID[t.id] = t
	return t
}

// immediate queues fn to run once the current callback is done.
func (c *child) immediate(fn goja.Callable, args []goja.Value) *task {
	t := c.addTask(fn, args)
	c.loop.immediates = append(c.loop.immediates, t)
	return t
}

// runLoop runs what the program left to do; it returns the first error
// thrown by a callback (which ends the program, as in Node).
func (c *child) runLoop() error {
	for {
		if err := c.unhandledRejection(); err != nil {
			return err
		}
		if len(c.loop.immediates) > 0 {
			batch := c.loop.immediates
			c.loop.immediates = nil
			for _, t := range batch {
				if t.fn == nil {
					continue
				}
				delete(c.loop.byID, t.id)
				if _, err := t.fn(goja.Undefined(), t.args...); err != nil {
					return err
				}
			}
			continue
		}
		if len(c.loop.timers) == 0 {
			return nil
		}
		t := c.loop.timers[0]
		if wait := time.Until(t.due); wait > 0 {
			c.flush() // output so far reaches the daemon while the program waits
			time.Sleep(wait)
		}
		heap.Pop(&c.loop.timers)
		if t.interval > 0 {
			t.due = time.Now().Add(t.interval)
			heap.Push(&c.loop.timers, t)
		} else {
			delete(c.loop.byID, t.id)
		}
		if _, err := t.fn(goja.Undefined(), t.args...); err != nil {
			return err
		}
	}
}

// unhandledRejection is an error for a rejected promise nothing handled,
// which ends a Node program.
func (c *child) unhandledRejection() error {
	for p := range c.loop.unhandled {
		return &rejection{reason: p.Result()}
	}
	return nil
}

type rejection struct{ reason goja.Value }

func (r *rejection) Error() string {
	s := "undefined"
	if r.reason != nil {
		s = r.reason.String()
		if o, ok := r.reason.(*goja.Object); ok {
			if st := o.Get("stack"); st != nil && !goja.IsUndefined(st) {
				s = st.String()
			}
		}
	}
	return "Uncaught (in promise) " + s
}
