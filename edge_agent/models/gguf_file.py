"""Reading a GGUF file's header (metadata and tensor table) without gguf.GGUFReader.

GGUFReader builds a Python object per vocabulary entry (tens of seconds for a
262,144-token vocabulary); this parser reads what it is asked for in well under a second.
"""
from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any, Iterable

import numpy as np

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NP_TYPES = {0: "u1", 1: "i1", 2: "u2", 3: "i2", 4: "u4", 5: "i4", 6: "f4", 7: "u1", 10: "u8", 11: "i8", 12: "f8"}
_STRING, _ARRAY = 8, 9


class _MetadataParser:
    """Reads the key/value section of a GGUF buffer (not the tensors): fast, unlike gguf.GGUFReader."""

    def __init__(self, buf: Any):
        self.buf = buf
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError("not a GGUF file (bad magic)")
        version = struct.unpack_from("<I", buf, 4)[0]
        self.e = "<" if version & 0xFFFF else ">"  # a big-endian file reads as a huge version
        self.version = struct.unpack_from(self.e + "I", buf, 4)[0]
        if self.version < 2:
            raise ValueError(f"GGUF version {self.version} is not supported (need 2 or later)")

    def items(self, wanted: Iterable[str] | None = None) -> dict[str, Any]:
        """The metadata as {key: value}; arrays of numbers are numpy arrays, of strings lists."""
        e, buf = self.e, self.buf
        n_kv = struct.unpack_from(e + "Q", buf, 16)[0]
        want = set(wanted) if wanted is not None else None
        off, out = 24, {}
        for _ in range(n_kv):
            key, off = self._str(off)
            vtype = struct.unpack_from(e + "I", buf, off)[0]
            value, off = self._value(vtype, off + 4, keep=want is None or key in want)
            if want is None or key in want:
                out[key] = value
        self.end = off
        return out

    def tensors(self) -> list[tuple[str, tuple[int, ...], int, int]]:
        """(name, shape, ggml type, offset from the data section) of each tensor; call after items()."""
        e, buf = self.e, self.buf
        n_tensors = struct.unpack_from(e + "Q", buf, 8)[0]
        off, out = self.end, []
        for _ in range(n_tensors):
            name, off = self._str(off)
            n_dims = struct.unpack_from(e + "I", buf, off)[0]
            dims = struct.unpack_from(e + "Q" * n_dims, buf, off + 4)
            ttype, offset = struct.unpack_from(e + "IQ", buf, off + 4 + 8 * n_dims)
            off += 4 + 8 * n_dims + 12
            out.append((name, tuple(int(d) for d in dims), int(ttype), int(offset)))
        self.tensors_end = off
        return out

    def _str(self, off: int) -> tuple[str, int]:
        n = struct.unpack_from(self.e + "Q", self.buf, off)[0]
        return bytes(self.buf[off + 8 : off + 8 + n]).decode("utf-8", "replace"), off + 8 + n

    def _value(self, vtype: int, off: int, keep: bool) -> tuple[Any, int]:
        e, buf = self.e, self.buf
        if vtype == _STRING:
            return self._str(off)
        if vtype in _SCALARS:
            fmt = e + _SCALARS[vtype]
            return struct.unpack_from(fmt, buf, off)[0], off + struct.calcsize(fmt)
        if vtype != _ARRAY:
            raise ValueError(f"unknown GGUF value type {vtype}")
        etype, count = struct.unpack_from(e + "IQ", buf, off)
        off += 12
        if etype in _NP_TYPES:
            dt = np.dtype(_NP_TYPES[etype]).newbyteorder(e)
            end = off + dt.itemsize * count
            arr = np.frombuffer(buf, dtype=dt, count=count, offset=off).astype(dt.newbyteorder("="), copy=True) if keep else None
            if arr is not None and etype == 7:
                arr = arr.astype(bool)
            return arr, end
        if etype == _STRING:
            return self._str_array(off, count, keep)
        values = []
        for _ in range(count):  # arrays of arrays: rare, small
            v, off = self._value(etype, off, keep)
            values.append(v)
        return values, off

    def _str_array(self, off: int, count: int, keep: bool) -> tuple[list[str] | None, int]:
        # One pass over a bytes copy of the region: ~0.1 s for 262,144 tokens, where walking
        # gguf.GGUFReader's per-element numpy parts costs several seconds.
        unpack = struct.Struct(self.e + "Q").unpack_from
        buf = self.buf
        if not keep:
            for _ in range(count):
                off += 8 + unpack(buf, off)[0]
            return None, off
        out: list[str] = [""] * count
        for i in range(count):
            n = unpack(buf, off)[0]
            out[i] = bytes(buf[off + 8 : off + 8 + n]).decode("utf-8", "replace")
            off += 8 + n
        return out, off


def read_gguf_header(path: str | Path, keys: Iterable[str]) -> tuple[dict[str, Any], list[tuple[str, int, int]], int]:
    """Selected metadata, every tensor's (name, elements, end offset in the file), and the file size.

    Reads only the header (fast). Raises ValueError (or struct.error) when the header is damaged.
    """
    import gguf

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        size = len(mm)
        parser = _MetadataParser(mm)
        meta = parser.items(set(keys) | {"general.alignment"})
        infos = parser.tensors()
    align = int(meta.get("general.alignment", 32) or 32)
    data_start = -(-parser.tensors_end // align) * align
    out = []
    for name, shape, ttype, offset in infos:
        n = int(np.prod(shape)) if shape else 1
        try:
            block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
        except (ValueError, KeyError):
            raise ValueError(f"tensor {name} has an unknown type {ttype}") from None
        out.append((name, n, data_start + offset + n // block * type_size))
    return meta, out, size
