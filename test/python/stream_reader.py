"""Reads a file front to back in 1 MiB read() calls, as a tar shard's
reader does, once a go file exists, and prints the sha256 of its bytes;
then waits for a release file before it exits (its node's leader keeps
serving the other nodes meanwhile).

    stream_reader.py PATH READY GO RELEASE

READY is created when the reader has started (its leader is up).
"""
import hashlib
import os
import sys
import time


def wait(path):
    while not os.path.exists(path):
        time.sleep(0.02)


def main():
    path, ready, go, release = sys.argv[1:5]
    open(ready, "w").close()
    wait(go)
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    print(h.hexdigest(), flush=True)
    wait(release)


main()
