"""Block-wise 4-bit weights in the layout of onnxruntime's com.microsoft MatMulNBits (bits=4).

MatMulNBits(A [.., K], B, scales[, zero_points]) computes A @ W with W [K, N] stored per
output column n in blocks of `block` consecutive k: B is uint8 [N, K/block, block/2], two
values per byte, the lower k in the low nibble; scales float [N * K/block]; zero_points
uint8 [N * ceil((K/block)/2)], also two per byte, low nibble first (absent: 8 for every
block). W[k, n] = (q - zp) * scale of its block. K is padded with zeros to a whole block.
"""
from __future__ import annotations

import numpy as np

BLOCK_SIZES = (16, 32, 64, 128, 256)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """uint8 values 0..15 [.., 2m] -> [.., m] bytes, even index in the low nibble."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def quantize_int4(w: np.ndarray, block: int, symmetric: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """w [K, N] float -> (B uint8 [N, K/block, block/2], scales float32 [N * K/block], zero_points or None).

    symmetric: the block's largest-magnitude value maps to -8 exactly and 0 to 0, stored as q + 8
    (onnxruntime's default zero point). Otherwise min..max of the block (0 included) over 0..15
    with a per-block zero point. Raises ValueError for a block size MatMulNBits does not take.
    """
    if block not in BLOCK_SIZES:
        raise ValueError(f"int4 block size must be one of {BLOCK_SIZES}, not {block}")
    k, n = w.shape
    kb = -(-k // block)
    wt = np.zeros((n, kb * block), np.float32)
    wt[:, :k] = w.T
    wt = wt.reshape(n, kb, block)
    if symmetric:
        idx = np.abs(wt).argmax(axis=-1)[..., None]
        extreme = np.take_along_axis(wt, idx, axis=-1)[..., 0]
        scale = (extreme / -8.0).astype(np.float32)
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(wt / scale[..., None]), -8, 7).astype(np.int16) + 8
        zp = None
    else:
        lo = np.minimum(wt.min(axis=-1), 0.0)
        hi = np.maximum(wt.max(axis=-1), 0.0)
        scale = ((hi - lo) / 15.0).astype(np.float32)
        scale[scale == 0] = 1.0
        z = np.clip(np.rint(-lo / scale), 0, 15).astype(np.int16)
        q = np.clip(np.rint(wt / scale[..., None]) + z[..., None], 0, 15).astype(np.int16)
        zp = np.full((n, kb + (kb & 1)), 8, np.int16)
        zp[:, :kb] = z
        zp = _pack_nibbles(zp.astype(np.uint8)).reshape(-1)
    packed = _pack_nibbles(q.astype(np.uint8))
    return np.ascontiguousarray(packed), scale.reshape(-1), zp


def dequantize_int4(packed: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, k: int) -> np.ndarray:
    """The float32 W [K, N] that MatMulNBits multiplies by, from quantize_int4's arrays (the reference)."""
    n, kb, half = packed.shape
    q = np.empty((n, kb, 2 * half), np.float32)
    q[..., 0::2] = packed & 0x0F
    q[..., 1::2] = packed >> 4
    if zero_points is None:
        z = np.full((n, kb), 8.0, np.float32)
    else:
        zb = zero_points.reshape(n, -1)
        z = np.empty((n, 2 * zb.shape[1]), np.float32)
        z[:, 0::2] = zb & 0x0F
        z[:, 1::2] = zb >> 4
        z = z[:, :kb]
    w = (q - z[..., None]) * scales.reshape(n, kb)[..., None]
    return np.ascontiguousarray(w.reshape(n, kb * 2 * half)[:, :k].T)
