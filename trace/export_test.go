package trace

// SetSpeculativePlans sets the plan table size the programs are loaded
// with before the arguments are planned, and returns the function that
// restores it.
func SetSpeculativePlans(n int) (restore func()) {
	old := speculativePlans
	speculativePlans = n
	return func() { speculativePlans = old }
}

// BaselineOptions is o with a program that does nothing at the same probe
// points: the baseline of the probes' overhead.
func BaselineOptions(o Options) Options {
	o.empty = true
	return o
}

// EntryOnlyOptions is o with entry probes only: the event transport
// without return probes.
func EntryOnlyOptions(o Options) Options {
	o.entryOnly = true
	return o
}

// IsBaseline says whether o is a BaselineOptions.
func IsBaseline(o Options) bool { return o.empty }
