"""The bytes of one stored page: boxes as little-endian integer columns, checksummed.

A page blob is::

    magic  b"MPG1"                       4 bytes
    ndim, nvalues                        u8, u8
    flags                                u8   (bit 0: payload is zlib-compressed)
    reserved                             u8   (0)
    nboxes                               u32
    payload length, uncompressed         u32
    widths                               u8 each of 2*ndim + nvalues columns (0, 1, 2,
                                         4, 8; 0: a constant column)
    payload                              the columns, each nboxes signed little-endian
                                         integers of its width; columns are numbered lo
                                         (ndim columns), extent hi - lo (ndim), values,
                                         and stored in order of width (1, 2, 4, 8), by
                                         number within a width; then the value of each
                                         constant column (width 0), an int64, by number
    crc32 of every byte above            u32

Nothing in it is executable: decoding is ``struct`` and ``numpy.frombuffer`` on bounded
lengths, and every field is checked (sizes, widths, checksum) before the arrays are built.
``decode`` raises ``ValueError`` naming what is wrong; the store turns that into a
``DatabaseError``. What the values *mean* (boxes inside their page, limits within the
target's, sane costs) is checked by ``morello.db``.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

MAGIC = b"MPG1"
_HEAD = struct.Struct("<4sBBBBII")
_CRC = struct.Struct("<I")
_WIDTHS: dict[int, np.dtype] = {w: np.dtype(f"<i{w}") for w in (1, 2, 4, 8)}
MAX_BOXES = 1 << 24        # boxes in one page
MAX_CELLS = 1 << 25        # integers in one page (256 MiB decoded)
MAX_PAYLOAD = 1 << 30      # uncompressed bytes of one page
_COMPRESSED = 1


def _widths(columns: np.ndarray) -> bytes:
    """The narrowest width in bytes holding each column (row) of ``columns``: 0 for a
    constant column (of at least one entry)."""
    if columns.shape[1] == 0:
        return bytes([1] * len(columns))
    lo, hi = columns.min(axis=1), columns.max(axis=1)
    out = np.full(len(columns), 8, np.uint8)
    for w in (4, 2, 1):
        bound = 1 << (8 * w - 1)
        out[(lo >= -bound) & (hi < bound)] = w
    out[lo == hi] = 0
    return out.tobytes()


def encode(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, compress: bool = True) -> bytes:
    """The blob of boxes ``[lo, hi] -> values`` (int64 arrays of n rows)."""
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    values = np.asarray(values, np.int64)
    n, ndim = lo.shape
    nvalues = values.shape[1]
    if hi.shape != lo.shape or values.shape[0] != n:
        raise ValueError("lo, hi and values disagree in shape")
    if not (1 <= ndim <= 255 and 1 <= nvalues <= 255 and n <= MAX_BOXES
            and n * (2 * ndim + nvalues) <= MAX_CELLS):
        raise ValueError(f"cannot encode {n} boxes of {ndim} coordinates, {nvalues} values")
    columns = np.concatenate([lo, hi - lo, values], axis=1).T
    widths = _widths(columns) if n else bytes([1] * len(columns))
    wide = np.frombuffer(widths, np.uint8)
    payload = b"".join(columns[wide == w].astype(_WIDTHS[w]).tobytes() for w in (1, 2, 4, 8))
    if n:
        payload += columns[wide == 0, 0].astype("<i8").tobytes()
    return pack(payload, widths, n, ndim, nvalues, compress)


def _payload_len(widths: bytes, n: int) -> int:
    """Bytes of a payload of ``n`` boxes in columns of these widths."""
    return n * sum(widths) + 8 * sum(1 for w in widths if w == 0)


def pack(payload: bytes, widths: bytes, n: int, ndim: int, nvalues: int,
         compress: bool = True) -> bytes:
    """The blob of a payload already in column form (``FrozenPage.stored_form``)."""
    if len(widths) != 2 * ndim + nvalues or len(payload) != _payload_len(widths, n):
        raise ValueError("payload and widths disagree")
    body = zlib.compress(payload, 1) if compress else payload
    head = _HEAD.pack(MAGIC, ndim, nvalues, _COMPRESSED if compress else 0, 0, n,
                      len(payload))
    blob = head + widths + body
    return blob + _CRC.pack(zlib.crc32(blob))


def decode(blob: bytes, ndim: int, nvalues: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, values)`` int64 arrays of a blob written for ``ndim`` coordinates and
    ``nvalues`` values; ValueError if the blob is not exactly that."""
    lo, hi, values, _, _ = decode_raw(blob, ndim, nvalues)
    return lo, hi, values


def unpack(blob: bytes, ndim: int, nvalues: int) -> tuple[bytes, bytes, int]:
    """``(payload, widths, nboxes)`` of a blob written for ``ndim`` coordinates and
    ``nvalues`` values, its header, sizes and checksum checked (ValueError if not exactly
    that); the payload's integers are not looked at (``FrozenPage`` checks them)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise ValueError(f"a page is {type(blob).__name__}, not bytes")
    blob = bytes(blob)
    ncols = 2 * ndim + nvalues
    if len(blob) < _HEAD.size + ncols + _CRC.size:
        raise ValueError(f"page of {len(blob)} bytes is truncated")
    (crc,) = _CRC.unpack_from(blob, len(blob) - _CRC.size)
    if zlib.crc32(memoryview(blob)[:-_CRC.size]) != crc:
        raise ValueError("page checksum mismatch")
    magic, nd, nv, flags, reserved, n, raw_len = _HEAD.unpack_from(blob)
    if magic != MAGIC:
        raise ValueError("not a page (bad magic)")
    if (nd, nv) != (ndim, nvalues):
        raise ValueError(f"page of {nd} coordinates and {nv} values, expected {ndim} "
                         f"and {nvalues}")
    if flags & ~_COMPRESSED or reserved:
        raise ValueError(f"page has unknown flags {flags:#x}/{reserved:#x}")
    if n > MAX_BOXES or n * ncols > MAX_CELLS:
        raise ValueError(f"page claims {n} boxes of {ncols} integers (at most {MAX_BOXES} "
                         f"boxes, {MAX_CELLS} integers)")
    widths = blob[_HEAD.size:_HEAD.size + ncols]
    if any(w not in _WIDTHS and (w != 0 or n == 0) for w in widths):
        raise ValueError("page has a column of unknown width")
    expected = _payload_len(widths, n)
    if raw_len != expected or raw_len > MAX_PAYLOAD:
        raise ValueError(f"page payload of {raw_len} bytes, expected {expected}")
    body = blob[_HEAD.size + ncols:-_CRC.size]
    if flags & _COMPRESSED:
        d = zlib.decompressobj()
        try:
            payload = d.decompress(body, raw_len + 1)
        except zlib.error as e:
            raise ValueError(f"page payload does not decompress ({e})") from None
        if len(payload) != raw_len or d.unconsumed_tail or not d.eof or d.unused_data:
            raise ValueError("page payload has the wrong length")
    else:
        payload = body
        if len(payload) != raw_len:
            raise ValueError("page payload has the wrong length")
    return payload, widths, n


def decode_raw(blob: bytes, ndim: int, nvalues: int):
    """``decode``, and also the uncompressed payload and its column widths (what a
    ``morello._frozen.FrozenPage`` reads)."""
    payload, widths, n = unpack(blob, ndim, nvalues)
    ncols = 2 * ndim + nvalues
    cols = np.empty((ncols, n), np.int64)
    pos = 0
    wide = np.frombuffer(widths, np.uint8)
    for w in (1, 2, 4, 8):
        idx = np.flatnonzero(wide == w)
        if len(idx):
            cols[idx] = np.frombuffer(payload, _WIDTHS[w], n * len(idx), pos).reshape(len(idx), n)
            pos += n * w * len(idx)
    idx = np.flatnonzero(wide == 0)
    if len(idx):
        cols[idx] = np.frombuffer(payload, "<i8", len(idx), pos)[:, None]
    lo = np.ascontiguousarray(cols[:ndim].T)
    ext = cols[ndim:2 * ndim].T
    if (lo < 0).any() or (ext < 0).any() or (lo > (1 << 62)).any() or (ext > (1 << 62)).any():
        raise ValueError("page has a box with negative or huge coordinates")
    hi = np.ascontiguousarray(lo + ext)
    return lo, hi, np.ascontiguousarray(cols[2 * ndim:].T), payload, widths
