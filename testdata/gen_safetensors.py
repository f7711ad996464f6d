"""Generates the PyTorch fixtures read by nn/checkpoint/safetensors tests.

Run with the system Python (torch 1.13, numpy):  /usr/bin/python3 testdata/gen_safetensors.py

safetensors/pytorch_small.safetensors (keep_dtype=True) holds tensors of many
dtypes together with PyTorch's own conversions of the same values, so the Go
test checks its decoders and its F16/BF16 rounding against torch:
  src            F32  values incl. ties, subnormals, overflow, inf, nan, -0
  src_f16        F16  src.half()              src_f16_f32  F32 src.half().float()
  src_bf16       BF16 src.bfloat16()          src_bf16_f32 F32 src.bfloat16().float()
  src_f64        F64  src.double() * 3 (exact)
  randn          F32  torch.randn(3, 4, 5) with seed 0
  num_batches_tracked  I64 rank 0 = 1234
  i64            I64  large and negative values beyond 2^53
  i32, i16, i8, u8, mask (BOOL), empty (F32, shape (0, 3))
  metadata: format=pt, note with non-ASCII, quotes and <&>.

safetensors/pytorch_default.safetensors (default conversion) holds a float64,
an int32 and a bool tensor, which fixturelib stores as F32, I64 and I64.
"""

import os

import numpy as np
import torch

from fixturelib import load_with_metadata, save

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "safetensors")


def special_values():
    f16_tiny = 2.0 ** -24  # smallest F16 subnormal
    vals = [
        0.0, -0.0, 1.0, -2.5, 3.14159265, 1e-3, 65504.0, 65519.0, 65520.0, 70000.0, -1e6,
        1.0 + 2.0 ** -11,  # F16 tie, rounds to even (1.0)
        1.0 + 3 * 2.0 ** -11,  # F16 tie, rounds up to even
        1.0 + 2.0 ** -8,  # BF16 tie, rounds to even (1.0)
        1.0 + 3 * 2.0 ** -8,  # BF16 tie, rounds up
        f16_tiny, f16_tiny / 2, f16_tiny * 0.75, f16_tiny * 1.5, 2.0 ** -14 - f16_tiny / 2,
        6.1e-5, 1e-8, 1e-40,  # the last is an F32 subnormal
        3.4e38, float("inf"), float("-inf"), float("nan"),
    ]
    return torch.tensor(vals, dtype=torch.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    src = torch.cat([special_values(), torch.randn(100) * 10])
    tensors = {
        "src": src,
        "src_f16": src.half(),
        "src_f16_f32": src.half().float(),
        "src_bf16": src.bfloat16(),
        "src_bf16_f32": src.bfloat16().float(),
        "src_f64": src.double() * 3,
        "randn": torch.randn(3, 4, 5),
        "num_batches_tracked": torch.tensor(1234, dtype=torch.int64),
        "i64": torch.tensor([[0, -1, 2 ** 62 + 1], [-(2 ** 63), 2 ** 63 - 1, 7]], dtype=torch.int64),
        "i32": torch.tensor([-(2 ** 31), 2 ** 31 - 1, 5], dtype=torch.int32),
        "i16": torch.tensor([-32768, 32767, -3], dtype=torch.int16),
        "i8": torch.tensor([-128, 127, -1], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "mask": torch.tensor([[True, False], [False, True]]),
        "empty": torch.zeros(0, 3),
    }
    meta = {"format": "pt", "note": 'caf\u00e9 \u2014 "quoted" <&> \\ tab\tend'}
    path = os.path.join(OUT, "pytorch_small.safetensors")
    save(path, tensors, metadata=meta, keep_dtype=True)

    back, back_meta = load_with_metadata(path)
    assert back_meta == meta, back_meta
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        b = back[name]
        assert b.dtype == t.dtype and b.shape == t.shape, name
        if t.is_floating_point():
            ok = (b == t) | (b.isnan() & t.isnan())
            assert bool(ok.all()), name
        else:
            assert torch.equal(b, t), name

    default = {
        "f64": torch.arange(6, dtype=torch.float64).reshape(2, 3) / 4,
        "i32": np.array([3, -4], dtype=np.int32),
        "flags": torch.tensor([True, False, True]),
    }
    path = os.path.join(OUT, "pytorch_default.safetensors")
    save(path, default)
    back = load_with_metadata(path)[0]
    assert back["f64"].dtype == torch.float32 and back["i32"].dtype == torch.int64
    assert back["flags"].tolist() == [1, 0, 1]


if __name__ == "__main__":
    main()
