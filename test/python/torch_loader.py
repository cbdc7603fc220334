"""Iterates a torchvision ImageFolder through a DataLoader and prints, as
JSON, one digest per sample and the processes that loaded them.

    torch_loader.py MODE ROOT NUM_WORKERS CONTEXT

MODE raw: a custom loader= returns each file's bytes, read with
    open().read() in the loading process; the digest is their sha256.
MODE pil: torchvision's default loader (PIL) and ToTensor; the digest is
    the sha256 of the tensor's shape and bytes.
CONTEXT is the multiprocessing start method (fork, forkserver, spawn),
ignored when NUM_WORKERS is 0.
"""
import hashlib
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Indexed(Dataset):
    """Returns (index, sample, pid of the loading process)."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        sample, _ = self.inner[i]
        return i, sample, os.getpid()


def digest(mode, sample):
    if mode == "raw":
        return hashlib.sha256(sample).hexdigest()
    h = hashlib.sha256(str(tuple(sample.shape)).encode())
    h.update(sample.contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    mode, root, workers, context = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "raw":
        folder = datasets.ImageFolder(root, loader=read_bytes)
    else:
        folder = datasets.ImageFolder(root, transform=transforms.ToTensor())
    g = torch.Generator()
    g.manual_seed(1234)
    loader = DataLoader(
        Indexed(folder), batch_size=4, shuffle=True, generator=g, num_workers=workers,
        multiprocessing_context=context if workers > 0 else None, collate_fn=as_list,
    )
    samples, pids = {}, set()
    for batch in loader:
        for i, sample, pid in batch:
            path = folder.samples[i][0]
            if path in samples:
                sys.exit(f"{path} loaded twice in one epoch")
            samples[path] = digest(mode, sample)
            pids.add(pid)
    json.dump({"main": os.getpid(), "pids": sorted(pids), "samples": samples}, sys.stdout)


def as_list(batch):
    """Keeps each sample as it is (bytes or a tensor) with its index."""
    return batch


if __name__ == "__main__":
    main()
