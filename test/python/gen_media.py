"""Writes the media files of the numpy/PIL/torch tests, deterministically.

    gen_media.py npy DIR N         N .npy arrays of assorted dtypes and shapes
    gen_media.py img DIR N EXT...  N images per extension (png, jpg) under DIR
    gen_media.py classes DIR C N   C class directories of N small JPEGs each

Runs without the shim: these are the originals the tests compare with.
"""
import os
import sys

import numpy as np
from PIL import Image


def image(rng, w, h, mode):
    """A gradient with noise: compresses like a photo, not like pure noise."""
    y, x = np.mgrid[0:h, 0:w]
    chans = 4 if mode == "RGBA" else 3
    base = np.stack([(x * (c + 1) * 7 + y * (3 - c) * 5) % 256 for c in range(chans)], axis=-1)
    noise = rng.integers(0, 48, size=base.shape)
    return Image.fromarray(((base + noise) % 256).astype(np.uint8), mode)


def save(im, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if path.endswith(".jpg"):
        im.convert("RGB").save(path, quality=90)
    else:
        im.save(path)


def main():
    kind, root = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20240601)
    os.makedirs(root, exist_ok=True)
    if kind == "npy":
        dtypes = [np.float32, np.int16, np.uint8, np.float64, np.int64]
        for i in range(int(sys.argv[3])):
            shape = (int(rng.integers(1, 200)), int(rng.integers(1, 300)))
            a = (rng.standard_normal(shape) * 1000).astype(dtypes[i % len(dtypes)])
            np.save(os.path.join(root, f"a{i:03d}.npy"), a)
    elif kind == "img":
        n, exts = int(sys.argv[3]), sys.argv[4:]
        for ext in exts:
            for i in range(n):
                mode = "RGBA" if ext == "png" and i % 2 else "RGB"
                im = image(rng, int(rng.integers(16, 160)), int(rng.integers(16, 120)), mode)
                save(im, os.path.join(root, f"i{i:03d}.{ext}"))
    elif kind == "classes":
        for c in range(int(sys.argv[3])):
            for i in range(int(sys.argv[4])):
                save(image(rng, 32, 32, "RGB"), os.path.join(root, f"class{c}", f"img{i:03d}.jpg"))
    else:
        sys.exit(f"unknown kind {kind}")


if __name__ == "__main__":
    main()
