"""Decoding the binary log-prob format (docs/http-api.md: "Binary log-prob format").

A vocabulary-wide row is thousands of floats; as JSON text it costs far more to send
and parse than its 4 bytes per value, so the client always asks for this format and
reads the values with one ``numpy.frombuffer``. Every size in the header is checked
against the body before any value is read: a mismatch raises rather than yielding
numbers that are silently misaligned.
"""

import struct
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .errors import CanopyProtocolError

MAGIC = b"CNPY"
VERSION = 1
HEADER = struct.Struct("<4sHBBIIIIII")  # magic, version, dtype, layout, 6 x u32
DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f2")}
DENSE, TOP_K = 0, 1
_I32 = np.dtype("<i4")


@dataclass(frozen=True)
class LogprobAnswer:
    """One decoded answer.

    ``rows`` is float32 ``[rows, cols]`` (owned and writable, whatever the wire
    dtype); ``ids`` is int32 ``[rows, cols]`` for top-k answers, else None.
    ``sequences`` echoes the token ids the server scored, so a caller can check the
    answer belongs to its request.
    """

    sequences: List[List[int]]
    rows: np.ndarray
    ids: Optional[np.ndarray]
    vocab: int


def decode_logprobs(body):
    """Decode a binary answer; raise ``CanopyProtocolError`` naming the first mismatch."""
    if len(body) < HEADER.size:
        raise CanopyProtocolError(
            f"binary answer is {len(body)} bytes, shorter than its {HEADER.size}-byte header")
    (magic, version, dtype_code, layout, n_sequences, n_rows, n_cols, vocab,
     total_tokens, reserved) = HEADER.unpack_from(body)
    if magic != MAGIC:
        raise CanopyProtocolError(f"binary answer starts with {magic!r}, not {MAGIC!r}")
    if version != VERSION:
        raise CanopyProtocolError(
            f"binary answer has format version {version}; this client reads {VERSION}")
    if dtype_code not in DTYPES:
        raise CanopyProtocolError(f"binary answer has unknown dtype code {dtype_code}")
    if layout not in (DENSE, TOP_K):
        raise CanopyProtocolError(f"binary answer has unknown layout {layout}")
    if reserved != 0:
        raise CanopyProtocolError(f"binary answer's reserved field is {reserved}, not 0")
    if layout == DENSE and n_cols != vocab:
        raise CanopyProtocolError(f"dense answer has {n_cols} columns for a vocabulary of {vocab}")
    if layout == TOP_K and n_cols > vocab:
        raise CanopyProtocolError(f"top-k answer has {n_cols} columns, more than the vocabulary {vocab}")
    if n_rows not in (n_sequences, total_tokens):
        raise CanopyProtocolError(
            f"answer has {n_rows} rows for {n_sequences} sequences of {total_tokens} tokens")

    dtype = DTYPES[dtype_code]
    cells = n_rows * n_cols
    expected = (HEADER.size + 4 * n_sequences + 4 * total_tokens
                + (4 * cells if layout == TOP_K else 0) + dtype.itemsize * cells)
    if len(body) != expected:
        raise CanopyProtocolError(f"binary answer is {len(body)} bytes; its header says {expected}")

    offset = HEADER.size
    lengths = np.frombuffer(body, "<u4", n_sequences, offset).tolist()
    offset += 4 * n_sequences
    if sum(lengths) != total_tokens:
        raise CanopyProtocolError(
            f"sequence lengths add up to {sum(lengths)}, not total_tokens {total_tokens}")
    tokens = np.frombuffer(body, _I32, total_tokens, offset).tolist()
    offset += 4 * total_tokens
    sequences, start = [], 0
    for length in lengths:
        sequences.append(tokens[start:start + length])
        start += length

    ids = None
    if layout == TOP_K:
        ids = np.frombuffer(body, _I32, cells, offset).astype(np.int32).reshape(n_rows, n_cols)
        offset += 4 * cells
        if cells and (ids.min() < 0 or ids.max() >= vocab):
            raise CanopyProtocolError(f"top-k ids fall outside the vocabulary [0, {vocab})")
    rows = np.frombuffer(body, dtype, cells, offset).astype(np.float32).reshape(n_rows, n_cols)
    return LogprobAnswer(sequences, rows, ids, vocab)
