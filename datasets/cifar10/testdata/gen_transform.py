#!/usr/bin/env python3
"""Generates transform_torch.bin, the reference for TestTransformMatchesTorch.

It reproduces torchvision's CIFAR-10 training transform with plain PyTorch ops
for fixed crop offsets and flips (torchvision is not installed here):
RandomCrop(32, padding=4) pads the raw uint8 image with zeros and takes a
32x32 window at (top, left); RandomHorizontalFlip mirrors it; ToTensor divides
by 255 in float32; Normalize computes (x - mean) / std in float32.

Output layout (little endian): 3072 image bytes (R, G, B planes), then for
each case in CASES 3 int32 (top, left, flip) and 3072 float32 values (CHW).
Run: /usr/bin/python3 gen_transform.py   (writes next to this script)
"""
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)
CASES = [(4, 4, 0), (0, 0, 0), (8, 8, 1), (3, 6, 1), (8, 0, 0), (0, 8, 1)]


def main():
    rng = np.random.RandomState(20240601)
    img = rng.randint(0, 256, size=(3, 32, 32)).astype(np.uint8)
    img[:, 0, 0] = 0      # include the extreme values
    img[:, 31, 31] = 255
    mean = torch.tensor(MEAN, dtype=torch.float32)[:, None, None]
    std = torch.tensor(STD, dtype=torch.float32)[:, None, None]
    out = bytearray(img.tobytes())
    padded = F.pad(torch.from_numpy(img), (4, 4, 4, 4), value=0)
    for top, left, flip in CASES:
        crop = padded[:, top:top + 32, left:left + 32]
        if flip:
            crop = torch.flip(crop, dims=[2])
        x = crop.to(torch.float32).div(255)
        x = x.sub(mean).div(std)
        out += struct.pack("<3i", top, left, flip)
        out += x.contiguous().numpy().astype("<f4").tobytes()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transform_torch.bin")
    with open(path, "wb") as f:
        f.write(out)
    print(path, len(out), "bytes")


if __name__ == "__main__":
    main()
