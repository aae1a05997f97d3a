// Command reparker parks goroutines in one of two functions with identical
// frames and, on command, moves each to the other: woken, a goroutine
// returns and parks again at the very same sp and pc, under other callers.
// gi must not mistake such a goroutine for one that never ran.
//
// It prints "READY" once every goroutine is parked in main.parkA. On stdin,
// "hop" wakes each once; when every one is parked again (in main.parkB, then
// main.parkA, and so on), it writes the runtime's own goroutine dump and
// answers "DONE dump=<path> in=<function>". "spawn N" starts N more, which
// park where the others are, and answers the same way once they have.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

var (
	n       = flag.Int("n", 1000, "goroutines that hop")
	hoppers int // started so far
)

//go:noinline
func parkA(c chan int) int { return <-c }

//go:noinline
func parkB(c chan int) int { return <-c }

//go:noinline
func hopper(c chan int) {
	for {
		parkA(c)
		parkB(c)
	}
}

//go:noinline
func hopperFromB(c chan int) {
	for {
		parkB(c)
		parkA(c)
	}
}

// parkedIn reports whether every hopper is blocked receiving in fn, from
// the runtime's own dump, and returns that dump.
func parkedIn(fn string) (bool, []byte) {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	count := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(g, "main.hopper") {
			continue
		}
		if !strings.Contains(g, "[chan receive") || !strings.Contains(g, fn+"(") {
			return false, nil
		}
		count++
	}
	return count == hoppers, buf.Bytes()
}

// waitParked polls the runtime's dump until every hopper is parked in fn.
func waitParked(fn string) []byte {
	for {
		if ok, dump := parkedIn(fn); ok {
			return dump
		}
		time.Sleep(time.Millisecond)
	}
}

func main() {
	flag.Parse()
	in := "main.parkA"
	var chans []chan int
	spawn := func(k int) {
		for i := 0; i < k; i++ {
			c := make(chan int)
			chans = append(chans, c)
			hoppers++
			if in == "main.parkA" {
				go hopper(c)
			} else {
				go hopperFromB(c)
			}
		}
	}
	spawn(*n)
	waitParked(in)
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch cmd, arg, _ := strings.Cut(sc.Text(), " "); cmd {
		case "hop":
			for _, c := range chans {
				c <- 1
			}
			if in == "main.parkA" {
				in = "main.parkB"
			} else {
				in = "main.parkA"
			}
		case "spawn":
			k, err := strconv.Atoi(arg)
			if err != nil {
				fmt.Println("DONE error " + err.Error())
				continue
			}
			spawn(k)
		default:
			fmt.Println("DONE error unknown command")
			continue
		}
		dump := waitParked(in)
		f, err := os.CreateTemp("", "reparker-dump-*.txt")
		if err == nil {
			_, err = f.Write(dump)
			f.Close()
		}
		if err != nil {
			fmt.Println("DONE error " + err.Error())
			continue
		}
		fmt.Printf("DONE dump=%s in=%s\n", f.Name(), in)
	}
}
