package ptrace

// testPoint is called at the named points of a call a stopped thread is
// made to make ("frame": its registers set, not yet resumed; "entry": in
// its system-call entry stop; "exit": in its exit stop; "returned": back
// in an interrupt stop, not yet restored; "copy-stopped": a clone's copy
// seized and stopped), for tests that kill the tracer there. It does
// nothing unless a test sets it.
var testPoint = func(string) {}
