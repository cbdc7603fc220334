"""Reads samples inside HDF5 files as a training job does, for augur's
clairvoyant policy to learn from, and prints one line per sample read:
"EPOCH RANK KEY SHA256".

    learn_inside.py make DIR FILES N        write FILES files of N samples
    learn_inside.py read DIR DATASET FIRST EPOCHS SEED

make writes DIR/part-K.h5 for K < FILES, each with two datasets of N
samples of 32x32x32 int16 (64 KiB): "contig" (contiguous) and "chunked"
(a chunk per sample), and prints "0 0 K/DATASET/I SHA256" for every
sample it wrote.

read reads DATASET of every DIR/part-*.h5 (a ConcatDataset of one
dataset per file, in sorted order) through a torch DataLoader with 2
forked workers, each of which opens the files itself and keeps them open
until it exits, in the order of a DistributedSampler of SEED (its rank
and world size from RANK and WORLD_SIZE, as torchrun sets them), for
epochs FIRST to FIRST+EPOCHS-1 (set_epoch: a job resumed at FIRST). After
the first epoch it waits, 20 s at most, until augur stat (AUGUR, for job
AUGUR_JOB) shows this rank's sampler learned, then goes on.
"""
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

SHAPE = (32, 32, 32)


def digest(b):
    return hashlib.sha256(b).hexdigest()


def make(d, files, n):
    import h5py

    rng = np.random.default_rng(44)
    for k in range(files):
        data = rng.integers(-3000, 3000, size=(n,) + SHAPE, dtype=np.int16)
        with h5py.File(os.path.join(d, "part-%d.h5" % k), "w") as f:
            f.create_dataset("contig", data=data)
            f.create_dataset("chunked", data=data, chunks=(1,) + SHAPE)
        for i in range(n):
            for name in ("contig", "chunked"):
                print(0, 0, "%d/%s/%d" % (k, name, i), digest(data[i].tobytes()))


def learned(rank):
    """Whether augur stat shows rank's sampler of samples inside files."""
    out = subprocess.run([os.environ["AUGUR"], "stat", "--json", "--job", os.environ["AUGUR_JOB"]],
                         capture_output=True, text=True).stdout
    try:
        rows = json.loads(out).get("streams") or []
    except ValueError:
        return False
    return any(r.get("samples") and r.get("sampler") and r.get("rank") == rank for r in rows)


def read(d, name, first, epochs, seed):
    import h5py
    from torch.utils.data import ConcatDataset, DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler

    class Part(Dataset):
        def __init__(self, k, path):
            self.k, self.path, self.f = k, path, None
            with h5py.File(path, "r") as f:
                self.n = len(f[name])

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.f is None:  # in the worker, left open at its exit
                self.f = h5py.File(self.path, "r")
            return "%d/%s/%d" % (self.k, name, i), digest(self.f[name][i].tobytes())

    paths = sorted(glob.glob(os.path.join(d, "part-*.h5")))
    ds = ConcatDataset([Part(int(p.rsplit("-", 1)[1].split(".")[0]), p) for p in paths])
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    dl = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2, multiprocessing_context="fork",
                    collate_fn=lambda batch: batch)
    for e in range(first, first + epochs):
        sampler.set_epoch(e)
        for batch in dl:
            for key, dg in batch:
                # One write per line: the ranks share the output.
                sys.stdout.write("%d %d %s %s\n" % (e, rank, key, dg))
                sys.stdout.flush()
        if e == first:
            deadline = time.time() + 20
            while not learned(rank) and time.time() < deadline:
                time.sleep(0.1)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "make":
        make(args[0], int(args[1]), int(args[2]))
    elif mode == "read":
        read(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
