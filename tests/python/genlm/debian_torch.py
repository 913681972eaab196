"""What Debian's torch 1.13 lacks for genlm's code, and pip's torch has.

Debian's torch has no MKL, and without it ``torch.sparse.mm(dense, csr)`` raises on the
CPU ("addmm ... SparseCsr ... without MKL"); genlm-backend's
``ParallelTokenCharacterTrie`` and genlm-bytes' trie call it. Not Canopy's: the tests and
docs/models.md's examples route that one product through COO (the same sums).
"""

import torch


def route_csr_products_through_coo():
    """Computes ``dense @ csr`` as ``(csr^T @ dense^T)^T`` with the matrix in COO form,
    where torch has no MKL; otherwise changes nothing."""
    if torch.backends.mkl.is_available():
        return
    product = torch.sparse.mm

    def mm(left, right):
        if (left.layout == torch.strided and right.layout == torch.sparse_csr
                and right.device.type == "cpu"):
            return product(right.to_sparse_coo().t(), left.t()).t()
        return product(left, right)

    torch.sparse.mm = mm
