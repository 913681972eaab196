"""What the client returns arrays as: numpy, or torch tensors for genlm code.

genlm-backend's callers call tensor methods on log-probs, so with torch importable
the default ("auto") hands out tensors; without it, numpy arrays, and torch is never
a requirement. Tensors share the decoded array's memory: no copy.
"""

import numpy as np

ARRAY_KINDS = ("auto", "numpy", "torch")


def array_converter(kind):
    """A function turning a float32 numpy array into the requested kind of array."""
    if kind not in ARRAY_KINDS:
        raise ValueError(f"array must be one of {ARRAY_KINDS}, not {kind!r}")
    if kind == "numpy":
        return np.asarray
    try:
        import torch
    except ImportError:
        if kind == "auto":
            return np.asarray
        raise ImportError("array='torch' needs PyTorch; install it or use array='numpy'") from None
    return torch.from_numpy
