package bpf

import (
	"github.com/cilium/ebpf"
)

// Event is one probe hit as the programs write it to the ring buffer.
type Event = giEvent

// Event kinds (Event.Kind).
const (
	KindEntry  = 1
	KindReturn = 2
	KindGoexit = 3
)

// CookieTLS, set in a probe's cookie, makes the program read the g pointer
// from thread-local storage instead of the register Go's ABI keeps it in.
const CookieTLS = 1 << 32

// Names of the programs, maps and load-time constants in the collection.
const (
	ProgEntry  = "gi_entry"
	ProgReturn = "gi_return"
	ProgGoexit = "gi_goexit"
	ProgEmpty  = "gi_empty"

	MapEvents = "events"
	MapLost   = "lost"
	MapGoids  = "goids"

	ConstGoidOffset    = "goid_offset"
	ConstStackHiOffset = "stack_hi_offset"
	ConstGTLSOffset    = "g_tls_offset"
	ConstFilterGoids   = "filter_goids"
	ConstGoPCOffset    = "gopc_offset"
	ConstParentOffset  = "parent_goid_offset"
	ConstPidnsDev      = "pidns_dev"
	ConstPidnsIno      = "pidns_ino"
)

// Spec returns the collection of programs and maps built for the host
// architecture, not yet loaded.
func Spec() (*ebpf.CollectionSpec, error) {
	return loadGi()
}
