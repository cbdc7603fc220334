"""Reads each file named on the command line once, as one kind of reader
does, and prints "NAME SHA256" of what it consumed (NAME: the file's name).

    first_readers.py KIND FILE...

KIND is read (open().read()), pread (os.pread until EOF), mmap (mmap.mmap
of the whole file), pil (PIL.Image.open(...).load(): the digest is of the
decoded pixels) or part:OFFSET:LENGTH (one os.pread of LENGTH at OFFSET).
"""
import hashlib
import mmap
import os
import sys


def consume(kind, path):
    if kind == "read":
        with open(path, "rb") as f:
            return f.read()
    if kind == "pread":
        fd = os.open(path, os.O_RDONLY)
        try:
            out, off = [], 0
            while True:
                b = os.pread(fd, 1 << 20, off)
                if not b:
                    return b"".join(out)
                out.append(b)
                off += len(b)
        finally:
            os.close(fd)
    if kind == "mmap":
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return bytes(m)
    if kind == "pil":
        from PIL import Image
        with Image.open(path) as im:
            im.load()
            return im.tobytes()
    if kind.startswith("part:"):
        _, off, n = kind.split(":")
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, int(n), int(off))
        finally:
            os.close(fd)
    sys.exit("unknown kind " + kind)


kind = sys.argv[1]
for p in sys.argv[2:]:
    print(os.path.basename(p), hashlib.sha256(consume(kind, p)).hexdigest(), flush=True)
