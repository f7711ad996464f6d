"""Generates the JPEG variants of nn/infer's TestRawImageJPEGKinds with
Pillow: progressive JPEGs of extreme shapes and CMYK (Adobe) JPEGs, which Go's
image/jpeg decodes to *image.YCbCr (every subsampling) and *image.CMYK.

    /usr/bin/python3 testdata/infer/gen_jpeg_kinds.py
"""
import os
from PIL import Image

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jpeg_kinds")
os.makedirs(out, exist_ok=True)


def picture(w, h, mode="RGB"):
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 7 + y * 3) % 256, (x * 2 + y * 11) % 256, (x * y + 40) % 256)
                 for y in range(h) for x in range(w)])
    return img.convert(mode)


for w, h, sub in [(1, 300, 2), (300, 1, 2), (40, 30, 2), (37, 23, 1), (5, 400, 0)]:
    picture(w, h).save(os.path.join(out, f"progressive_{w}x{h}_s{sub}.jpg"),
                       quality=80, progressive=True, subsampling=sub)
for w, h in [(20, 9), (1, 64), (64, 1)]:
    picture(w, h, "CMYK").save(os.path.join(out, f"cmyk_{w}x{h}.jpg"), quality=85)
