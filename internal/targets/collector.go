package targets

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildCollector builds the OpenTelemetry Collector of testdata/otelcol
// (the OTLP receiver and the file exporter, from the collector's modules on
// the module proxy) with the installed Go, cached like the targets.
func BuildCollector(tb testing.TB) string {
	return buildModule(tb, "otelcol", false)
}

// BuildCaddy builds the Caddy web server of testdata/caddy (v2.11.9 and its
// standard modules, from the module proxy) with cgo and the installed Go,
// cached like the targets: the big binary of gi's benchmarks.
func BuildCaddy(tb testing.TB) string {
	return buildModule(tb, "caddy", true)
}

// buildModule builds the program of the module in testdata/name (with cgo
// if cgo), once per version of its sources and of Go, into the targets'
// cache.
func buildModule(tb testing.TB, name string, cgo bool) string {
	tb.Helper()
	src := filepath.Join(Dir(), name)
	sum, err := hashTree(src)
	if err != nil {
		tb.Fatal(err)
	}
	h := sha256.Sum256([]byte(sum + "\x00" + runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "gi-targets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, name+"-"+hex.EncodeToString(h[:])[:20])
	m := lockFor(out)
	m.Lock()
	defer m.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tmp := out + fmt.Sprintf(".build-%d", os.Getpid())
	defer os.Remove(tmp)
	cmd := exec.Command(goCommand(), "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false -mod=readonly", "GOWORK=off", "CGO_ENABLED="+map[bool]string{false: "0", true: "1"}[cgo])
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build testdata/%s: %v\n%s", name, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Collector is a running OpenTelemetry Collector receiving OTLP/HTTP and
// writing what it receives to a file.
type Collector struct {
	// URL is the base URL of its OTLP/HTTP receiver.
	URL string
	// Out is the file the collector writes (OTLP JSON, one request per
	// line).
	Out string
	cmd *exec.Cmd
	log *os.File

	mu     sync.Mutex
	exited bool
}

// StartCollector starts a collector on a free local port and waits until
// it says it is ready. It is killed when the test ends.
func StartCollector(tb testing.TB) *Collector {
	tb.Helper()
	bin := BuildCollector(tb)
	dir := tb.TempDir()
	for attempt := 0; ; attempt++ {
		c, err := startCollector(bin, dir)
		if err == nil {
			tb.Cleanup(c.Kill)
			return c
		}
		if attempt == 3 {
			tb.Fatal(err)
		}
	}
}

func startCollector(bin, dir string) (*Collector, error) {
	// A free port: the collector cannot report one it picked itself.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	c := &Collector{URL: "http://" + addr, Out: filepath.Join(dir, "spans-"+strconv.Itoa(time.Now().Nanosecond())+".json")}
	config := filepath.Join(dir, "otelcol.yaml")
	err = os.WriteFile(config, []byte(fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, addr, c.Out)), 0o644)
	if err != nil {
		return nil, err
	}
	c.log, err = os.Create(filepath.Join(dir, "otelcol.log"))
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config", config)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the collector: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		c.cmd.Wait()
		c.mu.Lock()
		c.exited = true
		c.mu.Unlock()
		close(exited)
	}()
	deadline := time.After(time.Minute)
	for {
		b, _ := os.ReadFile(c.log.Name())
		if strings.Contains(string(b), "Everything is ready") {
			return c, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("the collector exited at start:\n%s", b)
		case <-deadline:
			c.Kill()
			return nil, fmt.Errorf("the collector did not get ready in a minute:\n%s", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill stops the collector at once (SIGKILL), as a crash would.
func (c *Collector) Kill() {
	c.mu.Lock()
	exited := c.exited
	c.mu.Unlock()
	if !exited {
		c.cmd.Process.Signal(syscall.SIGKILL)
	}
	for i := 0; i < 200; i++ {
		c.mu.Lock()
		exited = c.exited
		c.mu.Unlock()
		if exited {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.log.Close()
}

// Log returns what the collector logged.
func (c *Collector) Log() string {
	b, _ := os.ReadFile(c.log.Name())
	return string(b)
}

// OTLPSpan is a span as the collector's file exporter writes it (OTLP JSON),
// with its resource's attributes.
type OTLPSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Start        string `json:"startTimeUnixNano"`
	End          string `json:"endTimeUnixNano"`
	Status       struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	RawAttributes []otlpKeyValue `json:"attributes"`
	// Attributes and Resource are the attributes as strings.
	Attributes, Resource map[string]string `json:"-"`
}

type otlpKeyValue struct {
	Key   string `json:"key"`
	Value struct {
		String *string `json:"stringValue"`
		Int    *string `json:"intValue"`
		Bool   *bool   `json:"boolValue"`
	} `json:"value"`
}

func attributes(kvs []otlpKeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value; {
		case v.String != nil:
			m[kv.Key] = *v.String
		case v.Int != nil:
			m[kv.Key] = *v.Int
		case v.Bool != nil:
			m[kv.Key] = strconv.FormatBool(*v.Bool)
		}
	}
	return m
}

// StartNS and EndNS return the span's times.
func (s OTLPSpan) StartNS() int64 { n, _ := strconv.ParseInt(s.Start, 10, 64); return n }

// EndNS returns the span's end time.
func (s OTLPSpan) EndNS() int64 { n, _ := strconv.ParseInt(s.End, 10, 64); return n }

// Spans reads every span the collector has written so far.
func (c *Collector) Spans() ([]OTLPSpan, error) {
	f, err := os.Open(c.Out)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []OTLPSpan
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var req struct {
				ResourceSpans []struct {
					Resource struct {
						Attributes []otlpKeyValue `json:"attributes"`
					} `json:"resource"`
					ScopeSpans []struct {
						Spans []OTLPSpan `json:"spans"`
					} `json:"scopeSpans"`
				} `json:"resourceSpans"`
			}
			if err := json.Unmarshal(line, &req); err != nil {
				return nil, fmt.Errorf("collector output: %w", err)
			}
			for _, rs := range req.ResourceSpans {
				res := attributes(rs.Resource.Attributes)
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						s.Attributes, s.Resource = attributes(s.RawAttributes), res
						out = append(out, s)
					}
				}
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// WaitSpans waits until the collector has written at least n spans (it
// writes its file every 50 ms) and returns them.
func (c *Collector) WaitSpans(n int, timeout time.Duration) ([]OTLPSpan, error) {
	deadline := time.Now().Add(timeout)
	for {
		spans, err := c.Spans()
		if err != nil || len(spans) >= n || time.Now().After(deadline) {
			return spans, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
