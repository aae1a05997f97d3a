// Command layoutprobe is built with every Go release gi supports; its DWARF
// is where runtimelayout's table of runtime layouts for stripped binaries comes
// from. It uses pprof labels and the sync types goroutines wait on so that
// their types are linked in.
package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
)

func main() {
	pprof.Do(context.Background(), pprof.Labels("k", "v"), func(ctx context.Context) {
		fmt.Println(pprof.Label(ctx, "k"))
	})
	var mu sync.Mutex
	var rw sync.RWMutex
	var wg sync.WaitGroup
	cond := sync.NewCond(&mu)
	ready := false
	wg.Add(1)
	go func() {
		defer wg.Done()
		mu.Lock()
		rw.RLock()
		rw.RUnlock()
		ready = true
		cond.Broadcast()
		mu.Unlock()
	}()
	mu.Lock()
	for !ready {
		cond.Wait()
	}
	mu.Unlock()
	wg.Wait()
}
