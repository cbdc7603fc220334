"""Reads each file named on the command line once, in one of the ways a
first read's tee must follow or give up on (preload/tee.c), and prints
"NAME SHA256" of what it consumed.

    tee_readers.py KIND FILE...

The first FILE is read whole (chunks) whatever KIND: under the reactive
policy its open asks for its copy, which tells the leader the shared
filesystem's client; the others' opens then tee.

KIND:
  chunks    read() 1000 bytes at a time
  readinto  readinto() a buffer of the file's size
  dup       half through the descriptor, the rest through os.dup of it
  numpy     numpy.memmap (a shared read-only mapping of a duplicate)
  threads   two threads, each os.pread of one half, at once
  seekend   the last 100 bytes first, then all from the start (out of order)
  sendfile  os.sendfile into a scratch file, then that file is read
  fork      half, then a forked child reads the rest of the shared descriptor
  change    half; the file is then rewritten (same size, bytes inverted)
            through a write open; then the rest of the original descriptor
  grow      all of it in one read (its tee ends), then b"more" appended
            through a write open, then the descriptor read on to its end
  regrow:P  all of it in one read (its tee ends), then b"more" appended to
            the file at P (the same file outside the job: no write open
            augur sees), then the descriptor read again from 0: the old
            size in one read, then on to its end
"""
import hashlib
import os
import sys
import tempfile
import threading


def consume(kind, path):
    size = os.path.getsize(path)
    if kind == "chunks":
        out = []
        with open(path, "rb", buffering=0) as f:
            while b := f.read(1000):
                out.append(b)
        return b"".join(out)
    if kind == "readinto":
        buf = bytearray(size)
        with open(path, "rb", buffering=0) as f:
            n = f.readinto(buf)
        return bytes(buf[:n])
    if kind == "dup":
        fd = os.open(path, os.O_RDONLY)
        fd2 = os.dup(fd)
        a = os.read(fd, size // 2)
        b = os.read(fd2, size)
        os.close(fd)
        os.close(fd2)
        return a + b
    if kind == "numpy":
        import numpy as np
        m = np.memmap(path, dtype=np.uint8, mode="r")
        b = m.tobytes()
        del m
        return b
    if kind == "threads":
        fd = os.open(path, os.O_RDONLY)
        parts = [b"", b""]
        half = size // 2

        def part(i):
            off = i * half
            parts[i] = os.pread(fd, half if i == 0 else size - half, off)

        ts = [threading.Thread(target=part, args=(i,)) for i in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        os.close(fd)
        return parts[0] + parts[1]
    if kind == "seekend":
        with open(path, "rb", buffering=0) as f:
            f.seek(size - 100)
            tail = f.read()
            f.seek(0)
            return tail + f.read()
    if kind == "sendfile":
        fd = os.open(path, os.O_RDONLY)
        with tempfile.TemporaryFile() as out:
            off = 0
            while off < size:
                off += os.sendfile(out.fileno(), fd, off, size - off)
            os.close(fd)
            out.seek(0)
            return out.read()
    if kind == "fork":
        fd = os.open(path, os.O_RDONLY)
        a = os.read(fd, size // 2)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            rest = os.read(fd, size)
            os.write(w, hashlib.sha256(rest).hexdigest().encode())
            os._exit(0)
        os.close(w)
        digest = os.read(r, 64).decode()
        os.waitpid(pid, 0)
        os.close(r)
        os.close(fd)
        return a + digest.encode()
    if kind == "change":
        fd = os.open(path, os.O_RDONLY)
        a = os.read(fd, size // 2)
        with open(path, "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(bytes(255 - x for x in data))
        b = os.read(fd, size)
        os.close(fd)
        return a + b
    if kind == "grow":
        fd = os.open(path, os.O_RDONLY)
        a = os.read(fd, size)
        with open(path, "ab") as f:
            f.write(b"more")
        out = [a]
        while b := os.read(fd, 100):
            out.append(b)
        os.close(fd)
        return b"".join(out)
    if kind.startswith("regrow:"):
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, size)
        with open(os.path.join(kind[len("regrow:"):], os.path.basename(path)), "ab") as f:
            f.write(b"more")
        os.lseek(fd, 0, os.SEEK_SET)
        out = [os.read(fd, size)]  # up to where the tee ended, again
        while b := os.read(fd, 100):
            out.append(b)
        os.close(fd)
        return b"".join(out)
    sys.exit("unknown kind " + kind)


kind = sys.argv[1]
for i, p in enumerate(sys.argv[2:]):
    k = "chunks" if i == 0 else kind
    print(os.path.basename(p), hashlib.sha256(consume(k, p)).hexdigest(), flush=True)
