"""Ground truth for the seed package's tests: runs the real PyTorch, numpy
and torchvision code on requests read as JSON from stdin and prints the
answers as JSON. Nothing here re-implements a generator, except the one
marked TRANSCRIPTION, which is labelled as such in the Go test.

Request: {"op": name, ...}; answer: a JSON value, or {"error": text}.
Lists of indices may be answered as a digest (sha256 of little-endian int64)
when the request has "digest": true.
"""
import hashlib
import json
import os
import sys

import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

MASK64 = (1 << 64) - 1


def out_list(values, req):
    arr = np.asarray(values, dtype="<i8")
    if req.get("digest"):
        return hashlib.sha256(arr.tobytes()).hexdigest()
    return arr.tolist()


def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def random64s(g, k):
    """k values of random64() from a real torch generator: random_ over the
    full int64 range returns random64() reinterpreted as int64."""
    t = torch.empty(k, dtype=torch.int64).random_(-(2**63), None, generator=g)
    return [v & MASK64 for v in t.tolist()]


def op_version(req):
    return {"torch": torch.__version__, "numpy": np.__version__,
            "torchvision": torchvision.__version__}


def op_torch_stream(req):
    words = []
    for v in random64s(gen(req["seed"]), (req["k"] + 1) // 2):
        words += [v >> 32, v & 0xFFFFFFFF]
    return words[: req["k"]]


def op_torch_int64(req):
    g = gen(req["seed"])
    return [torch.empty((), dtype=torch.int64).random_(generator=g).item()
            for _ in range(req["k"])]


def op_randperm(req):
    p = torch.randperm(req["n"], generator=gen(req["seed"]))
    return out_list(p.numpy(), req)


def op_insideout(req):
    # TRANSCRIPTION of randperm_cpu for n >= uint32 max / 20 in torch >= 2.6
    # (aten/src/ATen/native/TensorFactories.cpp), fed with the random64()
    # stream of the real generator, because the installed torch predates it.
    n = req["n"]
    r = random64s(gen(req["seed"]), n)
    a = [0] * n
    for i in range(n):
        z = r[i] % (i + 1)
        a[i] = a[z]
        a[z] = i
    return out_list(a, req)


def op_distributed(req):
    s = DistributedSampler(range(req["n"]), num_replicas=req["R"], rank=req["rank"],
                           shuffle=req["shuffle"], seed=req["seed"],
                           drop_last=req["drop_last"])
    s.set_epoch(req["epoch"])
    return out_list(list(s), req)


def op_loader(req):
    """A whole training loop: seed, build the DataLoader, run every epoch to
    the end, record the indices actually fetched."""
    n, mode, seed = req["n"], req["mode"], req["seed"]
    ds = list(range(n))
    g = None
    if mode == "global":
        torch.manual_seed(seed)
    else:
        g = gen(seed)
    kw = dict(batch_size=req["batch"], drop_last=req["drop_last"],
              num_workers=req["workers"], persistent_workers=req["persistent"])
    ns = req.get("num_samples")
    if ns is None and mode != "sampler":
        dl = DataLoader(ds, shuffle=True, generator=g, **kw)
    else:
        sampler = RandomSampler(ds, num_samples=ns, generator=g)
        dl = DataLoader(ds, sampler=sampler, generator=g if mode == "loader" else None, **kw)
    epochs = []
    for _ in range(req["epochs"]):
        order = []
        for batch in dl:
            order += batch.tolist()
        epochs.append(out_list(order, req))
    return epochs


def rs_of(req):
    return np.random.RandomState(req["key"] if "key" in req else req["seed"])


def op_np_legacy(req):
    rs = rs_of(req)
    perms = [out_list(rs.permutation(req["n"]), req) for _ in range(req["epochs"])]
    raw = rs_of(req)._bit_generator.random_raw(req.get("raw", 0)).tolist()
    return {"perms": perms, "raw": raw}


def op_np_gen(req):
    rng = np.random.default_rng(req["seed"])
    perms = [out_list(rng.permutation(req["n"]), req) for _ in range(req["epochs"])]
    raw = np.random.default_rng(req["seed"]).bit_generator.random_raw(req.get("raw", 0)).tolist()
    return {"perms": perms, "raw": raw}


def op_np_stream_shard(req):
    mk = np.random.RandomState if req["legacy"] else np.random.default_rng
    g = mk(req["seed"])
    return [out_list(g.permutation(req["n"])[req["rank"]::req["R"]], req)
            for _ in range(req["epochs"])]


def op_np_reseed(req):
    mk = np.random.RandomState if req["legacy"] else np.random.default_rng
    return [out_list(mk(req["seed"] + e).permutation(req["n"])[req["rank"]::req["R"]], req)
            for e in range(req["epochs"])]


def rel_hex(paths, root):
    return [os.fsencode(os.path.relpath(p, root)).hex() for p in paths]


def op_imagefolder(req):
    root = req["root"]
    try:
        ds = torchvision.datasets.ImageFolder(root)
    except (FileNotFoundError, RuntimeError) as e:
        return {"error": str(e)}
    return rel_hex([p for p, _ in ds.samples], root)


def op_files(req):
    root = req["root"]
    found = [os.path.join(r, f) for r, _, fs in os.walk(root, followlinks=True)
             for f in fs if os.path.isfile(os.path.join(r, f))]
    # Sorted as str, the way a Python script sorts them.
    return [os.fsencode(p).hex() for p in sorted(os.path.relpath(p, root) for p in found)]


OPS = {k[3:]: v for k, v in globals().items() if k.startswith("op_")}


def main():
    reqs = json.load(sys.stdin)
    answers = []
    for req in reqs:
        try:
            answers.append(OPS[req["op"]](req))
        except Exception as e:  # reported, never hidden: the Go side fails on it
            answers.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
