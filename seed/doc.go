// Package seed predicts which sample each rank of a training job reads, in
// which order, in every epoch.
//
// The shuffle of SGD training is not random: it is a pure function of a
// seed, computed by a known generator and a known algorithm. This package
// is a bit-exact Go port of the generators and samplers that PyTorch and
// numpy run on the CPU, so that augur can know the future access order of a
// training script without running it, and prefetch in exactly that order.
//
// # Two halves: indices and files
//
// A Sampler yields dataset indices; a layout says which file each index
// reads. Put them together:
//
//	paths, err := seed.ImageFolder("/data/imagenet/train") // index → file
//	s, err := seed.New(seed.Spec{
//		Sampler:  "distributed", // DistributedSampler(dataset, R, r, seed=42)
//		Layout:   paths,
//		Seed:     42,
//		Replicas: 8,
//		Rank:     3,
//	})
//	for e := 0; e < epochs; e++ {
//		for _, i := range s.Epoch(e) { // after sampler.set_epoch(e)
//			_ = paths[i] // the next file rank 3 opens
//		}
//	}
//
// # Samplers
//
// New turns a Spec (what the configuration holds) into one of:
//
//   - DistributedSampler: torch.utils.data.DistributedSampler after
//     set_epoch(e), with its padding (drop_last=False) or truncation.
//   - RandomSampler: DataLoader(shuffle=True) over whole epochs, with the
//     generator carried across epochs the way torch carries it, including
//     the draws nobody sees: the DataLoader iterator's base seed and the
//     permutation RandomSampler draws and throws away when it is exhausted.
//   - SequentialSampler: DataLoader(shuffle=False).
//   - NumpySampler: numpy's default_rng (PCG64 through SeedSequence) or
//     legacy RandomState (MT19937) permutation, for loaders built on numpy.
//   - OrderFile: an order written down or recorded, for anything else.
//
// The generators are exported for direct use: TorchGenerator
// (torch.Generator on the CPU, with Randperm), NumpyRandomState and
// NumpyGenerator (with Permutation).
//
// # How exact
//
// Every generator and sampler is checked against the real PyTorch and numpy
// in this package's tests, which run them through Python and compare every
// index. See docs/seed.md for what was compared and what cannot be.
//
// # Caveats
//
//   - The "global" RandomSampler depends on the default generator having
//     been seeded with torch.manual_seed(Seed) and on nothing else in the
//     main process drawing from it between that call and the loop (model
//     initialisation on the CPU, random transforms run in the main
//     process, torch.rand calls do draw from it). Without manual_seed the
//     order is unpredictable by design.
//   - torch changed randperm for n ≥ InsideOutMinN (214,748,364); New
//     asks for the torch version only when the dataset is that large.
//   - With num_workers > 0, batches go to workers in turn and several are
//     read at once, so the order of individual opens within a few batches
//     depends on timing; the order of batches does not.
//   - Orders are computed for whole epochs; a loop that breaks out of an
//     epoch early leaves a shared generator elsewhere than predicted.
package seed
