//go:build go1.24

package main

import "runtime"

// cleanupObj holds a channel and has a cleanup attached.
type cleanupObj struct {
	ch  chan int
	pad [64]byte
}

// spawnCleanup parks a leaked goroutine on a channel that only an object
// with a cleanup holds, the object on the goroutine's stack alone: the
// collector marks a cleanup's function, never what its object points to
// (runtime.AddCleanup: the object may be collected while the cleanup
// waits), so nothing else keeps the channel reachable. It returns the
// goroutines it parked (0 before Go 1.24, which has no cleanups).
func spawnCleanup() int {
	o := &cleanupObj{ch: make(chan int)}
	runtime.AddCleanup(o, func(int) {}, 0)
	go func() {
		report <- record{goid(), "cleanup", true}
		<-o.ch
		runtime.KeepAlive(o)
	}()
	return 1
}
