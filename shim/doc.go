// Package shim is augur's control plane: the Go half of libaugur.so and
// the library behind the augur command.
//
// Every process of a job loads the configuration (Load), attaches the
// job's shared-memory segment (AttachSegment) and hands both to the C data
// plane. The first process that takes the job's leader lock (Lead) runs
// the control plane: it validates the tiers, marks the segment ready so
// the data plane may serve copies, and consumes the event ring.
package shim
