"""Reads files whole, one after the other, and prints "NAME SHA256" of
each, waiting after the first two until the leader's pool of tee files
is ready: the first file's open asks for its copy (it teaches the leader
the client), the second's tee tells the pool the size to make its files
for, and the others' tees should begin in the pool's files.

    pool_readers.py TEE_DIR FILE...

TEE_DIR is the job's tee directory ("-": no job, no wait); the wait for
its pool.0 is bounded (20 s), and a pool that never came is said on
stderr, exit status 1.
"""
import hashlib
import os
import sys
import time


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    print(os.path.basename(path), hashlib.sha256(data).hexdigest())


def main():
    tee_dir, files = sys.argv[1], sys.argv[2:]
    for path in files[:2]:
        read(path)
    deadline = time.monotonic() + 20
    while tee_dir != "-" and not os.path.exists(os.path.join(tee_dir, "pool.0")):
        if time.monotonic() > deadline:
            print("no pool file in %s after 20 s" % tee_dir, file=sys.stderr)
            sys.exit(1)
        time.sleep(0.01)
    for path in files[2:]:
        read(path)


if __name__ == "__main__":
    main()
