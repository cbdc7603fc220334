"""Reads files the way numpy and PIL users do and prints one sha256 per file.

    np_pil_readers.py METHOD FILE...

memmap, fromfile: digest of the raw file bytes.
npload, npload_mmap: digest of the array's C-order data (the .npy payload).
pil: digest of mode, size and decoded pixel bytes.
"""
import hashlib
import sys

import numpy as np
from PIL import Image


def digest(method, p):
    if method == "memmap":
        m = np.memmap(p, dtype=np.uint8, mode="r")
        return hashlib.sha256(m.tobytes()).hexdigest()
    if method == "fromfile":
        return hashlib.sha256(np.fromfile(p, dtype=np.uint8).tobytes()).hexdigest()
    if method in ("npload", "npload_mmap"):
        a = np.load(p, mmap_mode="r" if method == "npload_mmap" else None)
        return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    if method == "pil":
        with Image.open(p) as im:
            im.load()
            h = hashlib.sha256(f"{im.mode} {im.size}".encode())
            h.update(im.tobytes())
            return h.hexdigest()
    sys.exit(f"unknown method {method}")


def main():
    for p in sys.argv[2:]:
        print(digest(sys.argv[1], p))


if __name__ == "__main__":
    main()
