#!/usr/bin/python3
"""The real-client comparison of make bench: a PyTorch DataLoader over an
ImageFolder of JPEG files decoded with PIL, in DistributedSampler order.

    loader.py make ROOT COUNT     write COUNT JPEGs (256x256, 10 classes) under ROOT
    loader.py run ROOT [--epochs 3] [--workers 2] [--batch 16] [--seed 42]
                       [--compute-ms 15] [--barrier] [--start-epoch E] [--val]

--start-epoch E resumes a job: its epochs are set_epoch(E), E+1, ...
--val reads ROOT/train shuffled and, after each epoch, ROOT/val in order
(a forward pass: a third of the compute per batch), the ImageNet layout;
an epoch's seconds include its validation.

`run` prints one JSON line per epoch:
    {"epoch": 1, "seconds": ..., "samples": ..., "stall_seconds": ...}
With --barrier it waits for a line on stdin after each epoch but the last,
so the caller can read the emulated PFS's counters between epochs.
Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-pil); it reads the dataset through libc, so augur's LD_PRELOAD
sees every open.
"""
import argparse
import json
import os
import sys
import time


def make(root, count):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(1)
    for i in range(count):
        d = os.path.join(root, "class%02d" % (i % 10))
        os.makedirs(d, exist_ok=True)
        # Smooth colour fields with fine noise: photo-like JPEG sizes.
        low = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        img = Image.fromarray(low).resize((256, 256), Image.BICUBIC)
        arr = np.asarray(img, dtype=np.int16) + rng.integers(-12, 13, (256, 256, 3))
        Image.fromarray(arr.clip(0, 255).astype(np.uint8)).save(
            os.path.join(d, "img%06d.jpg" % i), quality=90)


def run(args):
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import datasets, transforms

    tf = transforms.Compose([transforms.Resize(128), transforms.CenterCrop(112), transforms.ToTensor()])

    def loader(root, shuffle):
        ds = datasets.ImageFolder(root, transform=tf)
        sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=shuffle, seed=args.seed)
        return sampler, DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers)

    def steps(dl, compute_ms):
        n, stall = 0, 0.0
        it = iter(dl)
        while True:
            s = time.monotonic()
            try:
                x, y = next(it)
            except StopIteration:
                return n, stall
            stall += time.monotonic() - s
            n += len(y)
            time.sleep(compute_ms / 1000)  # the accelerator computes

    train_root = os.path.join(args.root, "train") if args.val else args.root
    sampler, train = loader(train_root, True)
    val = loader(os.path.join(args.root, "val"), False)[1] if args.val else None
    for k in range(args.epochs):
        sampler.set_epoch(args.start_epoch + k)
        t0 = time.monotonic()
        n, stall = steps(train, args.compute_ms)
        if val is not None:
            vn, vstall = steps(val, args.compute_ms / 3)
            n, stall = n + vn, stall + vstall
        dt = time.monotonic() - t0
        print(json.dumps({"epoch": k + 1, "seconds": dt, "samples": n, "stall_seconds": stall}), flush=True)
        if args.barrier and k + 1 < args.epochs:
            sys.stdin.readline()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("root")
    m.add_argument("count", type=int)
    r = sub.add_parser("run")
    r.add_argument("root")
    r.add_argument("--epochs", type=int, default=3)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--batch", type=int, default=16)
    r.add_argument("--seed", type=int, default=42)
    r.add_argument("--compute-ms", type=float, default=15)
    r.add_argument("--barrier", action="store_true")
    r.add_argument("--start-epoch", type=int, default=0)
    r.add_argument("--val", action="store_true")
    a = p.parse_args()
    if a.cmd == "make":
        make(a.root, a.count)
    else:
        run(a)


if __name__ == "__main__":
    main()
