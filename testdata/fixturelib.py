"""Tiny safetensors reader and writer for proxgen's PyTorch fixture generators.

The Debian torch 1.13 has no safetensors module, so this implements the format
directly with numpy and torch only:

    8-byte little-endian header length N, N bytes of UTF-8 JSON padded with
    spaces so that 8+N is a multiple of 8, then the packed little-endian data.
    JSON: {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets"}}.

The layout matches the Go writer (nn/checkpoint/safetensors) byte for byte: compact
JSON, metadata first with sorted keys, tensors ordered by element size (largest
first) then by name, fields in the order dtype, shape, data_offsets.

Typical use in a generator script run from testdata/:

    from fixturelib import save
    save("autograd/conv2d_small.safetensors", {"x": x, "w": w, "out": out},
         metadata={"generator": "gen_conv2d.py"})

By default floating-point tensors are stored as F32 and integer and bool
tensors as I64, which is what the Go tests read with Tensor.Float32 and
Tensor.Int64. Pass keep_dtype=True to store each tensor in its own dtype.
"""

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype -> (numpy little-endian dtype used for the raw bytes, torch dtype)
_DTYPES = {
    "F64": ("<f8", torch.float64),
    "F32": ("<f4", torch.float32),
    "F16": ("<f2", torch.float16),
    "BF16": ("<u2", torch.bfloat16),  # raw bits; numpy has no bfloat16
    "I64": ("<i8", torch.int64),
    "I32": ("<i4", torch.int32),
    "I16": ("<i2", torch.int16),
    "I8": ("i1", torch.int8),
    "U8": ("u1", torch.uint8),
    "BOOL": ("u1", torch.bool),
}

_TORCH_TO_ST = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}

_NUMPY_TO_ST = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int16"): "I16",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}


def _size(dtype):
    return np.dtype(_DTYPES[dtype][0]).itemsize


def _encode(value, keep_dtype):
    """Returns (safetensors dtype, shape list, raw little-endian bytes)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if t.dtype not in _TORCH_TO_ST:
            raise TypeError(f"unsupported torch dtype {t.dtype}")
        dtype = _TORCH_TO_ST[t.dtype]
        if not keep_dtype:
            if t.is_floating_point():
                t, dtype = t.to(torch.float32), "F32"
            else:
                t, dtype = t.to(torch.int64), "I64"
        shape = list(t.shape)
        if dtype == "BF16":
            arr = t.view(torch.int16).numpy().view(np.uint16)
        elif dtype == "BOOL":
            arr = t.numpy().view(np.uint8)
        else:
            arr = t.numpy()
    else:
        arr = np.asarray(value)
        native = arr.dtype.newbyteorder("=")  # big-endian input is converted below
        if native not in _NUMPY_TO_ST:
            raise TypeError(f"unsupported numpy dtype {arr.dtype}")
        dtype = _NUMPY_TO_ST[native]
        if not keep_dtype:
            if np.issubdtype(arr.dtype, np.floating):
                arr, dtype = arr.astype(np.float32), "F32"
            else:
                arr, dtype = arr.astype(np.int64), "I64"
        shape = list(arr.shape)
        if dtype == "BOOL":
            arr = arr.view(np.uint8)
    data = np.ascontiguousarray(arr).astype(_DTYPES[dtype][0], copy=False).tobytes()
    if len(data) != int(np.prod(shape, dtype=np.int64)) * _size(dtype):
        raise AssertionError(f"internal error encoding {dtype} {shape}")
    return dtype, [int(d) for d in shape], data


def _json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def save(path, tensors, metadata=None, keep_dtype=False):
    """Writes tensors (a dict name -> torch.Tensor or numpy array) to path.

    Floating-point tensors are stored as F32 and integer and bool tensors as
    I64 unless keep_dtype is true, in which case F64, F32, F16, BF16, I64, I32,
    I16, I8, U8 and BOOL are kept. metadata is an optional dict of str -> str.
    The file is written to a temporary name and renamed into place.
    """
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must map str to str, got {k!r}: {v!r}")
    encoded = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"invalid tensor name {name!r}")
        encoded[name] = _encode(value, keep_dtype)
    names = sorted(encoded, key=lambda n: (-_size(encoded[n][0]), n))

    parts = []
    if metadata:
        meta = ",".join(_json(k) + ":" + _json(metadata[k]) for k in sorted(metadata))
        parts.append(_json("__metadata__") + ":{" + meta + "}")
    offset = 0
    for name in names:
        dtype, shape, data = encoded[name]
        info = '{"dtype":%s,"shape":%s,"data_offsets":[%d,%d]}' % (
            _json(dtype), _json(shape), offset, offset + len(data))
        parts.append(_json(name) + ":" + info)
        offset += len(data)
    header = ("{" + ",".join(parts) + "}").encode("utf-8")
    header += b" " * ((8 - (8 + len(header)) % 8) % 8)

    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for name in names:
            f.write(encoded[name][2])
    os.replace(tmp, path)


def load_with_metadata(path):
    """Reads path; returns (dict name -> torch.Tensor, metadata dict or None).

    Checks the header length, the dtypes and that the tensors tile the data
    section exactly; raises ValueError naming the problem otherwise.
    """
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    metadata = header.pop("__metadata__", None)
    out = {}
    pos = 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r}: unsupported dtype {dtype}")
        if begin != pos or end - begin != int(np.prod(shape, dtype=np.int64)) * _size(dtype):
            raise ValueError(f"{path}: tensor {name!r}: bad data_offsets {[begin, end]}")
        pos = end
        arr = np.frombuffer(data[begin:end], dtype=_DTYPES[dtype][0]).reshape(shape)
        if dtype == "BF16":
            t = torch.from_numpy(arr.copy().view(np.int16)).view(torch.bfloat16)
        elif dtype == "BOOL":
            t = torch.from_numpy(arr.astype(np.bool_))
        else:
            t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True))
        out[name] = t
    if pos != len(data):
        raise ValueError(f"{path}: tensors cover {pos} of {len(data)} data bytes")
    return out, metadata


def load(path):
    """Reads path and returns a dict name -> torch.Tensor."""
    return load_with_metadata(path)[0]
