"""fork_readers.py MODE N MANIFEST

Creates N child processes in batches, by MODE: "os.fork", or one of the
multiprocessing start methods "fork", "forkserver" (Process), or runs N
tasks in a "spawn" pool (N/5 spawned processes, see run_spawn_pool).
Each child (task) reads one dataset file of MANIFEST (a JSON list of
[path, sha256]) three ways — open().read(), os.pread, mmap — and exits 0
if all three gave the file's bytes, 3 if not, 4 on an exception.

Prints "ok N" when every child exited 0, else one line per failed child,
and exits 1. With AUGUR_DEBUG_GC_STRESS=1 the shim's Go runtime in this
process (and in every spawned one) collects garbage without pause, so the
forks happen while it holds its locks: a child that entered Go would hang.
"""
import hashlib
import json
import mmap
import multiprocessing as mp
import os
import sys

BATCH = 8


def load(manifest):
    with open(manifest) as f:
        return json.load(f)


def check(k, files):
    """Returns the readers (0 read, 1 pread, 2 mmap) that got wrong bytes."""
    path, want = files[k % len(files)]
    got = []
    with open(path, "rb") as f:
        got.append(f.read())
    fd = os.open(path, os.O_RDONLY)
    try:
        got.append(os.pread(fd, os.fstat(fd).st_size, 0))
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            got.append(m[:])
    return [i for i, b in enumerate(got) if hashlib.sha256(b).hexdigest() != want]


def child(k, manifest):
    try:
        bad = check(k, load(manifest))
    except BaseException as e:  # report, never hang the parent
        print(f"child {k}: {e!r}", file=sys.stderr)
        sys.exit(4)
    if bad:
        print(f"child {k}: wrong bytes from readers {bad}", file=sys.stderr)
        sys.exit(3)
    sys.exit(0)


def run_os_fork(n, manifest):
    codes = {}
    for start in range(0, n, BATCH):
        pids = {}
        for k in range(start, min(start + BATCH, n)):
            pid = os.fork()
            if pid == 0:
                code = 4
                try:
                    code = 3 if check(k, load(manifest)) else 0
                finally:
                    os._exit(code)
            pids[pid] = k
        for pid, k in pids.items():
            _, status = os.waitpid(pid, 0)
            codes[k] = os.waitstatus_to_exitcode(status)
    return codes


def run_mp(method, n, manifest):
    ctx = mp.get_context(method)
    if method == "spawn":
        return run_spawn_pool(ctx, n, manifest)
    codes = {}
    for start in range(0, n, BATCH):
        procs = [(k, ctx.Process(target=child, args=(k, manifest)))
                 for k in range(start, min(start + BATCH, n))]
        for _, p in procs:
            p.start()
        for k, p in procs:
            p.join()
            codes[k] = p.exitcode
    return codes


def task(k, manifest):
    try:
        return 3 if check(k, load(manifest)) else 0
    except BaseException as e:
        print(f"task {k}: {e!r}", file=sys.stderr)
        return 4


def run_spawn_pool(ctx, n, manifest):
    """Spawned children are new interpreters, each loading the shim and
    starting its Go runtime afresh (about 50 ms of CPU each here), and they
    fork nothing. So N tasks go to a pool whose workers are replaced every
    5 tasks: N/5 spawned processes. Garbage collection stress stays in this
    process only; in the children it would just slow the run."""
    os.environ.pop("AUGUR_DEBUG_GC_STRESS", None)
    with ctx.Pool(BATCH, maxtasksperchild=5) as pool:
        results = pool.starmap(task, [(k, manifest) for k in range(n)], chunksize=1)
    return dict(enumerate(results))


def main():
    mode, n, manifest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "os.fork":
        codes = run_os_fork(n, manifest)
    else:
        codes = run_mp(mode, n, manifest)
    failed = {k: c for k, c in codes.items() if c != 0}
    for k, c in sorted(failed.items()):
        print(f"child {k} exit {c}")
    if failed or len(codes) != n:
        sys.exit(1)
    print(f"ok {len(codes)}")


if __name__ == "__main__":
    main()
