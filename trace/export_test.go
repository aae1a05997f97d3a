package trace

// SetSpeculativePlans sets the plan table size the programs are loaded
// with before the arguments are planned, and returns the function that
// restores it.
func SetSpeculativePlans(n int) (restore func()) {
	old := speculativePlans
	speculativePlans = n
	return func() { speculativePlans = old }
}
