// Command pingpong is the scheduling-heavy workload of gi trace --why's
// benchmark: two goroutines pass a value back and forth over unbuffered
// channels, a goroutine switch per pass. It prints READY, then reads
// commands from stdin:
//
//	rally N   main.rally makes N round trips (2N switches) and answers
//	          "DONE switches_per_sec=<rate> ns_per_switch=<ns>"
//	tiny N    calls main.tiny N times and answers "DONE ns_per_call=<ns>"
//	sys N     makes N getppid(2) system calls through syscall.Syscall
//	          (entersyscall and exitsyscall) and answers "DONE
//	          ns_per_syscall=<ns>"
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var ping, pong = make(chan int), make(chan int)

func returner() {
	for v := range ping {
		pong <- v + 1
	}
}

// rally makes n round trips with the returner goroutine.
//
//go:noinline
func rally(n int) int {
	v := 0
	for i := 0; i < n; i++ {
		ping <- v
		v = <-pong
	}
	return v
}

// tiny is a small call with a frame: its probes sit on instructions the
// kernel emulates (a leaf without one starts with an instruction it
// single-steps, dearer by an order of magnitude).
//
//go:noinline
func tiny(x int) int { return leaf(x) + 1 }

//go:noinline
func leaf(x int) int { return x * 3 }

func main() {
	go returner()
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 2 {
			fmt.Println("DONE error usage")
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n <= 0 {
			fmt.Println("DONE error bad count")
			continue
		}
		start := time.Now()
		switch f[0] {
		case "rally":
			rally(n)
			d := time.Since(start)
			fmt.Printf("DONE switches_per_sec=%.0f ns_per_switch=%.1f\n", float64(2*n)/d.Seconds(), float64(d.Nanoseconds())/float64(2*n))
		case "tiny":
			x := 0
			for i := 0; i < n; i++ {
				x = tiny(x)
			}
			fmt.Printf("DONE ns_per_call=%.2f x=%d\n", float64(time.Since(start).Nanoseconds())/float64(n), x)
		case "sys":
			for i := 0; i < n; i++ {
				syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0)
			}
			fmt.Printf("DONE ns_per_syscall=%.1f\n", float64(time.Since(start).Nanoseconds())/float64(n))
		default:
			fmt.Println("DONE error unknown command")
		}
	}
}
