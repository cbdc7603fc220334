// Package dlbench is augur's deep-learning I/O benchmark, the body of
// `augur bench`: fio's habits applied to a training job's reads.
//
// A benchmark has three parts:
//
//   - a Dataset: generated (Generate: imagefolder, flat or records, with
//     fixed or normally distributed sample sizes) or scanned (Scan), as a
//     list of samples in dataset index order;
//   - a Workload: epochs, R ranks of W reader workers, batch size,
//     prefetch depth, compute time per batch, read mode, and the sampler
//     whose order the ranks follow (by default torch's DistributedSampler,
//     bit-exact through package seed, so a prefetcher can predict it);
//   - an Exec: which reader binary, where it finds the dataset (its root,
//     a pfsemu mount, a local copy), an optional preload library and
//     environment, and where the emulated PFS's counters come from.
//
// Run starts the reader and returns a Result with one Epoch per epoch:
// wall time, samples/s, MB/s, read-latency percentiles, stall time and the
// PFS counters of that epoch.
//
//	ds, _ := dlbench.Generate("/tmp/ds", dlbench.GenSpec{Count: 1000, Size: 128 << 10})
//	bin, _ := dlbench.FindReader("")
//	w := dlbench.DefaultWorkload()
//	res, err := dlbench.Run(ctx, "plain", ds, w, dlbench.Exec{Reader: bin})
//	dlbench.WriteTable(os.Stdout, res)
//
// # Why the readers are C
//
// The processes that read the dataset are dlreader (bench/c/dlreader), a
// small C program that forks ranks and workers and reads with libc's
// open/read/pread/mmap as a DataLoader does. Go's os package makes raw
// system calls no LD_PRELOAD library sees, and a Go reader under augur's
// preload would hold two Go runtimes; so Go only orchestrates: it
// generates data, computes orders, mounts the PFS and collects results.
//
// # Per-epoch counters
//
// The reader prints a line when an epoch ends and waits for a line on its
// standard input before the next; Run reads the PFS counters in between,
// so each epoch's counters are its own. The first epoch's also hold what
// the reader process did before it (a preload library's start-up).
//
// # Caveats
//
//   - Compute is a sleep: an accelerator computes while the CPU is free.
//     CPU-heavy preprocessing (JPEG decoding) is not modelled; the PyTorch
//     comparison of make bench measures it with a real client.
//   - Latencies are per sample: open to close of a whole file, the read
//     calls of a record (record files stay open in each worker).
//   - Samples/s counts samples read, including DistributedSampler's padding.
package dlbench
