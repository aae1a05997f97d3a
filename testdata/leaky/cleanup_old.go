//go:build !go1.24

package main

// spawnCleanup parks nothing before Go 1.24, which has no cleanups.
func spawnCleanup() int { return 0 }
