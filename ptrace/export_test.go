package ptrace

// FreezeOn is Freeze with the thread that calls clone chosen, for tests
// that make every kind of thread call it.
func (s *Stopped) FreezeOn(tid int, g Gadget) (*Frozen, error) { return s.freezeOn(tid, g) }

// MaskSwapped is maskSwapped, for its test.
var MaskSwapped = maskSwapped

// SetTestPoint sets what runs at the named points of a call (testPoint).
func SetTestPoint(f func(string)) { testPoint = f }
