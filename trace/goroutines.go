package trace

// maxHeaderCache bounds the goroutine headers remembered.
const maxHeaderCache = 1 << 16

// headerCache remembers, per goroutine, what its first entry event said
// about who created it (the BPF program reads g.gopc and g.parentGoid as the
// goroutine runs: reading them later from user space would race with the g
// being reused by another goroutine).
type headerCache struct {
	sym    *Symbols
	cache  map[GoroutineKey]Header
	labels func(GoroutineKey, uint64) map[string]string
}

func newHeaderCache(sym *Symbols) *headerCache {
	return &headerCache{sym: sym, cache: map[GoroutineKey]Header{}}
}

// Seen records a goroutine from an entry event.
func (r *headerCache) Seen(ev *Event) {
	k := GoroutineKey{PID: ev.PID, Goid: ev.Goid}
	if _, ok := r.cache[k]; ok {
		return
	}
	h := Header{Goid: ev.Goid, PID: ev.PID, ParentID: ev.Parent, G: ev.G}
	if ev.GoPC != 0 {
		h.Known = true
		// Like the runtime's traceback, no creator for the main goroutine
		// (its gopc is the bootstrap's call of newproc).
		if ev.Goid != 1 {
			h.CreatedBy = r.sym.Resolve(ev.PID, ev.GoPC, true)
		}
	}
	if r.labels != nil && ev.G != 0 {
		h.Labels = r.labels(k, ev.G)
	}
	if len(r.cache) >= maxHeaderCache {
		clear(r.cache)
	}
	r.cache[k] = h
}

// Header returns what is known about goroutine k.
func (r *headerCache) Header(k GoroutineKey) Header {
	if h, ok := r.cache[k]; ok {
		return h
	}
	return Header{Goid: k.Goid, PID: k.PID}
}

// Forget drops the header of an exited goroutine.
func (r *headerCache) Forget(k GoroutineKey) { delete(r.cache, k) }
