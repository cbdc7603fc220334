"""Reads samples inside large files as real clients do, epoch after
epoch, and prints one line per sample read: "EPOCH KEY SHA256" (the
sha256 of the sample's bytes).

    inside_readers.py h5-make PATH N                  make an HDF5 file
    inside_readers.py h5 PATH DATASET EPOCHS          h5py under a DataLoader
    inside_readers.py tar EPOCHS SHARD...             tarfile, member by member
    inside_readers.py fromfile PATH HEADER SIZE N EPOCHS
    inside_readers.py memmap PATH HEADER SIZE N EPOCHS

h5-make writes N samples of 32x32x32 int16 (64 KiB) into two datasets of
PATH, "contig" (contiguous: sample i at get_offset() + i * 64 KiB) and
"chunked" (chunks of 4 samples), and prints "0 DATASET/I SHA256" for
every sample it wrote.

h5 reads DATASET's samples in a shuffled order (a seeded generator per
epoch) through a torch DataLoader with 2 forked workers, each of which
opens the file itself the first time it loads a sample and keeps it open
until it exits (the usual h5py Dataset); keys are DATASET/I. After each
epoch's samples, a line "workers EPOCH W" gives the processes other than
the main one that loaded them.

tar reads every member of each shard with tarfile in stream mode ("r|",
WebDataset's way: read() front to back); keys are SHARD/MEMBER.

fromfile reads each of N records of SIZE bytes after HEADER bytes with
numpy.fromfile(offset=...), in a shuffled order; memmap maps the records
once with np.memmap(offset=HEADER) and reads them in a shuffled order.
Keys are record indices.
"""
import hashlib
import os
import sys
import tarfile

import numpy as np

SHAPE = (32, 32, 32)


def digest(b):
    return hashlib.sha256(b).hexdigest()


def h5_make(path, n):
    import h5py

    rng = np.random.default_rng(43)
    data = {name: rng.integers(-3000, 3000, size=(n,) + SHAPE, dtype=np.int16) for name in ("contig", "chunked")}
    with h5py.File(path, "w") as f:
        f.create_dataset("contig", data=data["contig"])
        f.create_dataset("chunked", data=data["chunked"], chunks=(4,) + SHAPE)
        # The layouts the test is about, or nothing it says holds.
        assert f["contig"].chunks is None and f["contig"].id.get_offset() is not None
        assert f["chunked"].chunks == (4,) + SHAPE and f["chunked"].compression is None
    for name, arr in data.items():
        for i in range(n):
            print(0, "%s/%d" % (name, i), digest(arr[i].tobytes()))


def h5(path, name, epochs):
    import h5py
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Samples(Dataset):
        def __init__(self):
            self.f = None
            with h5py.File(path, "r") as f:
                self.n = len(f[name])

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.f is None:  # in the worker, left open at its exit
                self.f = h5py.File(path, "r")
            return i, digest(self.f[name][i].tobytes()), os.getpid()

    for e in range(epochs):
        loaders = set()
        g = torch.Generator()
        g.manual_seed(1000 + e)
        dl = DataLoader(Samples(), batch_size=4, shuffle=True, generator=g, num_workers=2,
                        multiprocessing_context="fork", collate_fn=lambda batch: batch)
        for batch in dl:
            for i, d, pid in batch:
                print(e, "%s/%d" % (name, i), d)
                loaders.add(pid)
        loaders.discard(os.getpid())
        print("workers", e, len(loaders))


def tar(epochs, shards):
    for e in range(epochs):
        for path in shards:
            with tarfile.open(path, mode="r|") as tf:
                for m in tf:
                    if m.isfile():
                        print(e, "%s/%s" % (os.path.basename(path), m.name), digest(tf.extractfile(m).read()))


def records(how, path, header, size, n, epochs):
    mm = None
    if how == "memmap":
        mm = np.memmap(path, dtype=np.uint8, mode="r", offset=header, shape=(n, size))
    for e in range(epochs):
        for i in np.random.default_rng(2000 + e).permutation(n):
            if mm is not None:
                x = np.array(mm[i])
            else:
                x = np.fromfile(path, dtype=np.uint8, count=size, offset=header + int(i) * size)
            if len(x) != size:
                sys.exit("record %d: %d bytes, want %d" % (i, len(x), size))
            print(e, int(i), digest(x.tobytes()))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "h5-make":
        h5_make(args[0], int(args[1]))
    elif mode == "h5":
        h5(args[0], args[1], int(args[2]))
    elif mode == "tar":
        tar(int(args[0]), args[1:])
    elif mode in ("fromfile", "memmap"):
        records(mode, args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
