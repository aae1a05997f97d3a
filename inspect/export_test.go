package inspect

// SetBeforeStop makes f run in each snapshot of t between the copy made
// before the stop and the stop, given the number of stacks copied.
func SetBeforeStop(t *Target, f func(stacksCopied int)) { t.beforeStop = f }
