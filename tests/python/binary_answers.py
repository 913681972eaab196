"""Builds binary log-prob answers as docs/http-api.md lays them out, to test the decoder.

Written from the docs' table, not from the client's decoder, so a misreading in
one is not mirrored by the other.
"""

import struct

import numpy as np

DTYPE_CODES = {"float32": (1, "<f4"), "float16": (2, "<f2")}


def pack_answer(sequences, rows, vocab, ids=None, dtype="float32"):
    """The bytes of an answer: ``rows`` [R, C] values, ``ids`` [R, C] for top-k."""
    code, wire_dtype = DTYPE_CODES[dtype]
    rows = np.asarray(rows, dtype=np.float64)
    total = sum(len(s) for s in sequences)
    layout = 0 if ids is None else 1
    out = b"CNPY" + struct.pack("<HBB", 1, code, layout)
    out += struct.pack("<6I", len(sequences), rows.shape[0], rows.shape[1], vocab, total, 0)
    out += struct.pack(f"<{len(sequences)}I", *(len(s) for s in sequences))
    out += struct.pack(f"<{total}i", *(t for s in sequences for t in s))
    if ids is not None:
        out += np.asarray(ids, dtype="<i4").tobytes()
    return out + rows.astype(wire_dtype).tobytes()


def with_field(body, offset, fmt, value):
    """``body`` with the field at ``offset`` overwritten: a corrupt answer."""
    out = bytearray(body)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)
