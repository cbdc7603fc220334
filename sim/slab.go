package sim

// slab makes one slice of n T to be cut into many nodes' arrays: one
// allocation rather than one per node.
func slab[T any](n int) []T { return make([]T, n) }
