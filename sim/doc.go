// Package sim is augur sim: it simulates the time a training job spends
// on I/O under augur's policies and their rivals, from a few nodes to a
// thousand, where one machine cannot run the job itself.
//
// Only time is simulated. What each rank reads, in which order, is the
// DistributedSampler's order as package seed reproduces it bit for bit;
// which file goes to which tier of which node is the leader's clairvoyant
// placement (placement.PlaceNode, the leader's own placer) and holders'
// rule (placement.Holders); which node owns a file under the reactive policy with
// peers is peers.Owner. A simulator with its own copy of those would
// tell nothing about augur's.
//
// The model (engine.go): each rank runs a DataLoader of workers that read
// whole batches file after file, at most a prefetch factor of batches per
// worker ahead; the rank computes on each batch, then waits for every
// rank of the job (DDP). A read is served by a node's tier (its latency
// and bandwidth), or by the PFS: one pipe whose aggregate throughput
// depends on the number of readers in it (NoPFS's t(γ)), reserved in
// time order, plus a latency per file and per request. augur's copy pool
// (one queue, each tier's threads at once, copies in flight bounded)
// fetches from the PFS or from another node over the two nodes' links.
// Policies: pfs (no cache), perfect (every read from the first tier: the
// bound), staging (a prefetch buffer in access order, nothing kept),
// reactive (copy on first read, MONARCH), hvac (reactive, a file's owner
// copying it for the others, peers.Owner), clairvoyant (NoPFS alone) and
// clairvoyant+peers (NoPFS, augur).
//
// Memory and time scale with what the nodes read: each node numbers its
// own files (int32), the dataset costs 4 bytes per file for its sizes,
// and events are per batch, per PFS read and per copy, never per
// goroutine. See docs/sim.md for the validation against make bench and
// the projections.
package sim
