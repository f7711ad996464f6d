"""Writes testdata/infer/resize_pil.bin: what torchvision's
Compose([Resize(32), CenterCrop(32)]) makes of synthetic RGB images, for
nn/infer's RawImage test.

torchvision is not installed here, so its two transforms are written out
with PIL (Pillow 9.4) exactly as torchvision 0.14 implements them for PIL
images: Resize(32) -> img.resize((w', h'), Image.BILINEAR) with the shorter
side 32 and the longer int(32 * long / short), skipped when the shorter side
already is 32; CenterCrop(32) -> crop at int(round((h - 32) / 2.0)),
int(round((w - 32) / 2.0)).

Each case: int32 LE width, int32 LE height, then 3072 bytes (R, G, B planes
of the 32x32 result). The input pixel (x, y, c) is pixel(x, y, c) below;
nn/infer/preprocess_test.go computes the same formula.
"""
import os
import struct

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "infer")
SIZES = [(100, 75), (23, 40), (64, 64), (33, 200), (32, 50), (47, 32), (31, 31)]


def pixel(x, y, c):
    return (x * 7 + y * 13 + c * 31 + (x * y) % 17 * 5 + (x ^ y) * 3) % 256


def transform(img):
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    if short != 32:
        new_short, new_long = 32, int(32 * long / short)
        size = (new_short, new_long) if w <= h else (new_long, new_short)
        img = img.resize(size, Image.BILINEAR)
    w, h = img.size
    top, left = int(round((h - 32) / 2.0)), int(round((w - 32) / 2.0))
    return img.crop((left, top, left + 32, top + 32))


def main():
    os.makedirs(OUT, exist_ok=True)
    out = bytearray()
    for w, h in SIZES:
        a = np.zeros((h, w, 3), dtype=np.uint8)
        for y in range(h):
            for x in range(w):
                for c in range(3):
                    a[y, x, c] = pixel(x, y, c)
        res = np.asarray(transform(Image.fromarray(a, "RGB")), dtype=np.uint8)
        assert res.shape == (32, 32, 3), res.shape
        out += struct.pack("<ii", w, h) + res.transpose(2, 0, 1).tobytes()
    with open(os.path.join(OUT, "resize_pil.bin"), "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
