// Command fanout is an HTTP service whose requests each run on a fresh
// goroutine (its clients open a connection per request, as net/http serves
// each connection on a goroutine of its own): the handler calls
// main.stageA, which sleeps and calls main.stageB, which sleeps and calls
// main.stageC, which sleeps. It measures every stage call itself, the
// ground truth for gi ps --trace.
//
// Commands on stdin, answered by one "DONE" line:
//
//	clients N            start N client goroutines calling / in a loop
//	stats START END      per stage, the calls that began and ended within
//	                     [START, END] (Unix ns): stageA=N stageB=N stageC=N
//
// With -clients N the clients start at once. It prints READY once it
// listens.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	clients = flag.Int("clients", 0, "client goroutines started at once")
	stage   = flag.Duration("stage", 20*time.Millisecond, "how long each stage sleeps, ±25%")
)

type record struct {
	stage      string
	start, end int64
}

var (
	recMu   sync.Mutex
	records []record
)

// measure records one stage call.
func measure(name string, start time.Time) {
	end := time.Now()
	recMu.Lock()
	records = append(records, record{name, start.UnixNano(), end.UnixNano()})
	recMu.Unlock()
}

// nap is how long a stage sleeps: -stage ±25%. The stage itself sleeps,
// so that its goroutine is in time.Sleep called from the stage.
func nap() time.Duration {
	d := *stage
	return d*3/4 + time.Duration(rand.Int63n(int64(d)/2+1))
}

//go:noinline
func stageC() {
	defer measure("stageC", time.Now())
	time.Sleep(nap())
}

//go:noinline
func stageB() {
	defer measure("stageB", time.Now())
	time.Sleep(nap())
	stageC()
}

//go:noinline
func stageA() {
	defer measure("stageA", time.Now())
	time.Sleep(nap())
	stageB()
}

//go:noinline
func handle(w http.ResponseWriter, r *http.Request) {
	stageA()
	io.WriteString(w, "ok\n")
}

//go:noinline
func client(url string) {
	// A connection per request: each request runs on a fresh goroutine of
	// the server.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := c.Get(url)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func startClients(n int, url string) {
	for i := 0; i < n; i++ {
		go client(url)
	}
}

func main() {
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
	url := "http://" + ln.Addr().String() + "/"
	go http.Serve(ln, http.HandlerFunc(handle))
	startClients(*clients, url)
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "clients":
			n, _ := strconv.Atoi(f[1])
			startClients(n, url)
			fmt.Println("DONE clients")
		case "stats":
			lo, _ := strconv.ParseInt(f[1], 10, 64)
			hi, _ := strconv.ParseInt(f[2], 10, 64)
			counts := map[string]int{}
			recMu.Lock()
			for _, r := range records {
				if r.start >= lo && r.end <= hi {
					counts[r.stage]++
				}
			}
			recMu.Unlock()
			fmt.Printf("DONE stats stageA=%d stageB=%d stageC=%d\n", counts["stageA"], counts["stageB"], counts["stageC"])
		default:
			fmt.Println("DONE error unknown command", f[0])
		}
	}
	select {}
}
