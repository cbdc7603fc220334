// Package shim is augur's control plane: the Go half of libaugur.so and
// the library behind the augur command.
//
// Every process of a job loads the configuration (Load), attaches the
// job's shared-memory segment (AttachSegment) and hands both to the C data
// plane. The first process that takes the job's leader lock (Lead) runs
// the control plane: it validates the tiers, marks the segment ready so
// the data plane may serve copies, and consumes the event ring.
//
// The clairvoyant policy predicts and places by package placement, which
// augur plan and augur sim share; this package runs it (clairvoyant.go
// names the files of its parts). Its cgo files (segment.go, ring.go,
// stats.go, pending.go, tee.go, writers.go) hold the Go side of the data
// plane's ABI, which package placement, and so augur sim, never links.
package shim
