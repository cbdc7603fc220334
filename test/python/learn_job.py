"""A training job as real scripts write it, for the tests of the clairvoyant
policy's learning (test/learn_test.go): torchvision ImageFolder, a real
DataLoader with worker processes, DistributedSampler, ranks from the
launcher's variables or from code. It prints "<dataset> <sha256>" for
every sample it reads.

    learn_job.py ROOT LAYOUT EPOCHS [options]

LAYOUT is "plain" (ROOT is the ImageFolder) or "imagenet" (ROOT/train is
read shuffled every epoch, then ROOT/val in order). Options:
    --seed S          DistributedSampler's seed (default 0, as torch's)
    --start-epoch E   resume: the loop starts at set_epoch(E)
    --workers W       DataLoader workers (default 2)
    --batch B         batch size (default 8)
    --compute-ms M    the step's compute time per batch, slept (default 0);
                      a third of it per validation batch (forward only)
    --spawn N         torch.multiprocessing.spawn of N ranks that learn
                      their rank and the world size in code only
                      (init_process_group with a file store)
    --sync DIR        at the end of each epoch, wait for every rank to end
                      it (files in DIR, shared by the ranks): the step
                      that DDP's all-reduce makes of a job's nodes, for the
                      tests whose nodes run as separate jobs
Without --spawn the rank and world size come from the environment as
torch.distributed's env:// would read them (RANK, WORLD_SIZE), else SLURM's
(SLURM_PROCID, SLURM_NTASKS).
"""
import argparse
import hashlib
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torchvision
from torch.utils.data import DataLoader, DistributedSampler


def load(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def env_rank():
    for r, w in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if r in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return 0, 1


def digests(batch):
    return [x[0] for x in batch]


def loader(root, sampler_args, args, shuffle):
    ds = torchvision.datasets.ImageFolder(root, loader=load)
    sampler = DistributedSampler(ds, shuffle=shuffle, seed=args.seed, **sampler_args)
    dl = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                    collate_fn=digests)
    return sampler, dl


def sync(d, epoch, rank, world):
    """Waits, at most two minutes, until every rank has ended epoch."""
    open(os.path.join(d, "e%d.r%d" % (epoch, rank)), "w").close()
    deadline = time.monotonic() + 120
    while sum(os.path.exists(os.path.join(d, "e%d.r%d" % (epoch, r))) for r in range(world)) < world:
        if time.monotonic() > deadline:
            sys.exit("sync: not every rank of %d ended epoch %d in two minutes" % (world, epoch))
        time.sleep(0.01)


def train(args, sampler_args, out):
    if args.layout == "imagenet":
        train_root, val_root = os.path.join(args.root, "train"), os.path.join(args.root, "val")
    else:
        train_root, val_root = args.root, None
    sampler, dl = loader(train_root, sampler_args, args, True)
    val = loader(val_root, sampler_args, args, False)[1] if val_root else None
    for e in range(args.start_epoch, args.start_epoch + args.epochs):
        sampler.set_epoch(e)
        for batch in dl:
            for d in batch:
                out.write("train %s\n" % d)
            time.sleep(args.compute_ms / 1000)
        if val is not None:
            for batch in val:
                for d in batch:
                    out.write("val %s\n" % d)
                time.sleep(args.compute_ms / 3000)  # a forward pass
        if args.sync:
            sync(args.sync, e, sampler_args["rank"], sampler_args["num_replicas"])
    out.flush()


def spawned(rank, args, world, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    with open(os.path.join(args.out, "rank%d" % rank), "w") as out:
        train(args, {}, out)  # the sampler asks torch.distributed
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("layout", choices=["plain", "imagenet"])
    p.add_argument("epochs", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-epoch", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--spawn", type=int, default=0)
    p.add_argument("--compute-ms", type=float, default=0)
    p.add_argument("--sync")
    args = p.parse_args()
    if args.sync and args.spawn:
        p.error("--sync is for ranks started as separate jobs, not --spawn")
    if args.spawn:
        with tempfile.TemporaryDirectory() as d:
            args.out = d
            torch.multiprocessing.spawn(spawned, args=(args, args.spawn, os.path.join(d, "store")),
                                        nprocs=args.spawn)
            for r in range(args.spawn):
                with open(os.path.join(d, "rank%d" % r)) as f:
                    sys.stdout.write(f.read())
        return
    rank, world = env_rank()
    train(args, {"num_replicas": world, "rank": rank}, sys.stdout)


if __name__ == "__main__":
    main()
