"""Writes resize_pil_large.bin: torchvision's Resize(32) + CenterCrop(32) of
large and extreme-shaped synthetic images, computed with Pillow (the same
arithmetic as torchvision on a PIL image: resize of the shorter side to 32
with BILINEAR, longer side int(32*long/short), then the centred crop with
Python's round). Records: uint32 LE width, height, then 3072 bytes (R, G, B
planes of 32x32). Run with a Python that has Pillow (python3-pil):

    /usr/bin/python3 testdata/infer/gen_resize_large.py
"""
import os
import struct

from PIL import Image


def pixel(x, y, c):
    return (x * 7 + y * 13 + c * 31 + (x * y) % 17 * 5 + (x ^ y) * 3) % 256


def synthetic(w, h):
    data = bytearray(3 * w * h)
    i = 0
    for y in range(h):
        for x in range(w):
            data[i] = pixel(x, y, 0)
            data[i + 1] = pixel(x, y, 1)
            data[i + 2] = pixel(x, y, 2)
            i += 3
    return Image.frombytes("RGB", (w, h), bytes(data))


def resize_crop(img):
    w, h = img.size
    if (w <= h and w == 32) or (h <= w and h == 32):
        nw, nh = w, h
    elif w < h:
        nw, nh = 32, int(32 * h / w)
    else:
        nw, nh = int(32 * w / h), 32
    if (nw, nh) != (w, h):
        img = img.resize((nw, nh), Image.BILINEAR)
    top = int(round((nh - 32) / 2.0))
    left = int(round((nw - 32) / 2.0))
    img = img.crop((left, top, left + 32, top + 32))
    r, g, b = img.split()
    return r.tobytes() + g.tobytes() + b.tobytes()


SHAPES = [(1024, 768), (768, 1024), (1, 5000), (5000, 1), (3, 2000), (2000, 3),
          (33, 4000), (4000, 31), (1, 1), (1, 40), (17, 1)]

out = bytearray()
for w, h in SHAPES:
    out += struct.pack("<II", w, h) + resize_crop(synthetic(w, h))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_pil_large.bin")
with open(path, "wb") as f:
    f.write(out)
