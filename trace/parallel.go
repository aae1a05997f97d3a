package trace

import (
	"sync"
	"sync/atomic"
)

// maxParallel bounds the goroutines parallel runs at once (detaching perf
// events, decoding probe sites).
const maxParallel = 64

// parallel runs do(0) … do(n-1) on up to maxParallel goroutines and
// returns the first error.
func parallel(n int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	for range min(n, maxParallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
