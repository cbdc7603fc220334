package seed

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Sampler kinds accepted in Spec.Sampler.
const (
	KindDistributed = "distributed"  // torch DistributedSampler
	KindRandom      = "random"       // torch RandomSampler / DataLoader(shuffle=True)
	KindSequential  = "sequential"   // torch SequentialSampler / DataLoader(shuffle=False)
	KindNumpy       = "numpy"        // numpy.random.default_rng(seed).permutation
	KindNumpyLegacy = "numpy-legacy" // numpy.random.RandomState(seed).permutation
	KindFilePrefix  = "file:"        // "file:<path>": an order file, see ReadOrder
)

// Spec describes the sampler of one rank as a training script sets it up,
// in the terms of its framework. It is what the configuration holds; New
// turns it into a Sampler. Fields that do not apply to the chosen sampler
// are ignored.
type Spec struct {
	// Sampler is one of "distributed", "random", "sequential", "numpy",
	// "numpy-legacy" or "file:<path>". In the path of an order file,
	// "{rank}" is replaced by Rank, so each rank can have its own file.
	Sampler string

	// Len is len(dataset). It may be left 0 when Layout is given.
	Len int

	// Seed is DistributedSampler(seed=...), the seed of torch.manual_seed
	// or of the generator given to the DataLoader or RandomSampler, or
	// the numpy seed (0 ≤ Seed, and < 2**32 for numpy-legacy). A torch
	// seed s ≥ 2**63 is int64(s): torch keeps the same 64 bits and uses
	// only the low 32. numpy seeds ≥ 2**63 need NewNumpyGenerator.
	Seed int64

	// Replicas and Rank are num_replicas and rank of a
	// DistributedSampler (WORLD_SIZE and RANK under torchrun). For numpy
	// samplers a rank reads perm[Rank::Replicas]. Replicas 0 means 1.
	// random and sequential ignore them: every rank reads the whole
	// dataset, so give each rank its own Seed if the script does.
	Replicas, Rank int

	// NoShuffle is DistributedSampler(shuffle=False).
	NoShuffle bool
	// DropLast is DistributedSampler(drop_last=True).
	DropLast bool
	// NoSetEpoch says the script never calls sampler.set_epoch, so a
	// DistributedSampler repeats the order of epoch 0.
	NoSetEpoch bool

	// Generator is where a "random" sampler draws from: "global"
	// (default; no generator anywhere, torch.manual_seed(Seed) at
	// start), "loader" (DataLoader(generator=g), g seeded with Seed) or
	// "sampler" (RandomSampler(generator=g) passed to the DataLoader).
	// See GeneratorGlobal and the others.
	Generator string
	// PersistentWorkers is DataLoader(num_workers>0,
	// persistent_workers=True), which draws the workers' base seed once
	// instead of every epoch; "global" and "loader" depend on it.
	PersistentWorkers bool
	// NumSamples is RandomSampler(num_samples=...); 0 means Len.
	NumSamples int

	// BatchSize and DropLastBatch are DataLoader(batch_size=...,
	// drop_last=True): the last partial batch of each epoch is never
	// read. Without DropLastBatch, BatchSize does not change the order.
	// Order files ignore them.
	BatchSize     int
	DropLastBatch bool

	// Reseed says a numpy loader makes a new generator seeded with
	// Seed+epoch each epoch, instead of drawing one permutation after
	// another from one generator seeded once.
	Reseed bool

	// Torch is torch.__version__ ("2.5", "2.6.0+cu124"). It is needed only
	// when Len ≥ InsideOutMinN, where randperm changed in 2.6.
	Torch string

	// Layout is the dataset's file list (from a Layout function), used
	// to turn the paths of an order file into indices; Root is the
	// dataset root, stripped from absolute paths in an order file.
	Layout []string
	Root   string
}

// New returns the Sampler spec describes, or an error wrapping ErrSpec,
// ErrTorchVersion or ErrOrderFile that says what is wrong.
func New(spec Spec) (Sampler, error) {
	n, err := spec.length()
	if err != nil {
		return nil, err
	}
	replicas, rank, err := spec.shard()
	if err != nil {
		return nil, err
	}
	var s Sampler
	switch kind := spec.Sampler; {
	case kind == KindDistributed:
		if n > math.MaxInt32 { // its permutations are kept in int32s
			return nil, fmt.Errorf("%w: %d samples: a DistributedSampler over more than %d is not predicted", ErrSpec, n, math.MaxInt32)
		}
		v, err := spec.torchVersion(n)
		if err != nil {
			return nil, err
		}
		s = &DistributedSampler{n: n, replicas: replicas, rank: rank, shuffle: !spec.NoShuffle,
			dropLast: spec.DropLast, setEpoch: !spec.NoSetEpoch, seed: spec.Seed, torch: v}
	case kind == KindRandom:
		if s, err = spec.random(n); err != nil {
			return nil, err
		}
	case kind == KindSequential:
		s = &SequentialSampler{n: n}
	case kind == KindNumpy || kind == KindNumpyLegacy:
		if err := spec.numpySeed(kind == KindNumpyLegacy); err != nil {
			return nil, err
		}
		s = newNumpySampler(n, replicas, rank, kind == KindNumpyLegacy, spec.Reseed, spec.Seed)
	case strings.HasPrefix(kind, KindFilePrefix):
		return spec.orderFile(strings.TrimPrefix(kind, KindFilePrefix), rank)
	case kind == "":
		return nil, fmt.Errorf("%w: no sampler given; want %s", ErrSpec, kindList)
	default:
		return nil, fmt.Errorf("%w: unknown sampler %q; want %s", ErrSpec, kind, kindList)
	}
	return spec.batched(s)
}

const kindList = `"distributed", "random", "sequential", "numpy", "numpy-legacy" or "file:<path>"`

// length checks Len against Layout and returns the dataset length.
func (spec Spec) length() (int, error) {
	switch {
	case spec.Len < 0:
		return 0, fmt.Errorf("%w: negative Len %d", ErrSpec, spec.Len)
	case spec.Layout != nil && spec.Len == 0:
		return len(spec.Layout), nil
	case spec.Layout != nil && spec.Len != len(spec.Layout):
		return 0, fmt.Errorf("%w: Len %d but the layout has %d files", ErrSpec, spec.Len, len(spec.Layout))
	}
	return spec.Len, nil
}

// shard checks Replicas and Rank as DistributedSampler does.
func (spec Spec) shard() (replicas, rank int, err error) {
	replicas = spec.Replicas
	if replicas == 0 {
		replicas = 1
	}
	if replicas < 0 {
		return 0, 0, fmt.Errorf("%w: negative Replicas %d", ErrSpec, spec.Replicas)
	}
	if spec.Rank < 0 || spec.Rank >= replicas {
		return 0, 0, fmt.Errorf("%w: Rank %d, want 0..%d for %d replicas", ErrSpec, spec.Rank, replicas-1, replicas)
	}
	return replicas, spec.Rank, nil
}

// torchVersion parses Torch, which may be left empty unless n is large
// enough for randperm to differ between releases.
func (spec Spec) torchVersion(n int) (TorchVersion, error) {
	if spec.Torch != "" {
		return ParseTorchVersion(spec.Torch)
	}
	if n >= InsideOutMinN {
		return TorchVersion{}, fmt.Errorf("%w: a dataset of %d ≥ %d samples is shuffled differently from torch %s on; set the torch version",
			ErrTorchVersion, n, InsideOutMinN, insideOutSince)
	}
	return TorchVersion{}, nil
}

// random builds a "random" sampler.
func (spec Spec) random(n int) (Sampler, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: random: RandomSampler needs a non-empty dataset", ErrSpec)
	}
	num := spec.NumSamples
	if num == 0 {
		num = n
	}
	if num < 0 {
		return nil, fmt.Errorf("%w: random: negative NumSamples %d", ErrSpec, spec.NumSamples)
	}
	mode := spec.Generator
	switch mode {
	case "":
		mode = GeneratorGlobal
	case GeneratorGlobal, GeneratorLoader, GeneratorSampler:
	default:
		return nil, fmt.Errorf("%w: random: unknown Generator %q; want %q, %q or %q",
			ErrSpec, spec.Generator, GeneratorGlobal, GeneratorLoader, GeneratorSampler)
	}
	v, err := spec.torchVersion(n)
	if err != nil {
		return nil, err
	}
	return newRandomSampler(n, num, mode, spec.PersistentWorkers, spec.Seed, v), nil
}

// numpySeed checks Seed against what numpy accepts.
func (spec Spec) numpySeed(legacy bool) error {
	if spec.Seed < 0 {
		return fmt.Errorf("%w: numpy refuses the negative seed %d", ErrSpec, spec.Seed)
	}
	if legacy && spec.Seed > 1<<32-1 {
		return fmt.Errorf("%w: RandomState seeds must be below 2**32, got %d", ErrSpec, spec.Seed)
	}
	return nil
}

// orderFile reads the order file named in the spec.
func (spec Spec) orderFile(name string, rank int) (Sampler, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: \"file:\" needs a path", ErrSpec)
	}
	name = strings.ReplaceAll(name, "{rank}", strconv.Itoa(rank))
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOrderFile, err)
	}
	defer f.Close()
	o, err := ReadOrder(f, spec.Layout, spec.Root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if spec.Layout == nil && spec.Len > 0 {
		for e, ep := range o.epochs {
			for _, i := range ep {
				if i >= spec.Len {
					return nil, fmt.Errorf("%s: %w: epoch %d: index %d ≥ Len %d", name, ErrOrderFile, e, i, spec.Len)
				}
			}
		}
	}
	return o, nil
}

// batched applies DataLoader(drop_last=True).
func (spec Spec) batched(s Sampler) (Sampler, error) {
	if spec.BatchSize < 0 {
		return nil, fmt.Errorf("%w: negative BatchSize %d", ErrSpec, spec.BatchSize)
	}
	if !spec.DropLastBatch {
		return s, nil
	}
	if spec.BatchSize == 0 {
		return nil, fmt.Errorf("%w: DropLastBatch needs a BatchSize", ErrSpec)
	}
	return &fullBatches{inner: s, batch: spec.BatchSize}, nil
}

// fullBatches is a torch sampler seen through DataLoader(drop_last=True):
// the last partial batch is never fetched, although the sampler itself is
// still run to its end.
type fullBatches struct {
	inner Sampler
	batch int
}

func (b *fullBatches) Epoch(e int) []int {
	o := b.inner.Epoch(e)
	return o[:len(o)-len(o)%b.batch]
}
