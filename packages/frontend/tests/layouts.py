"""Copies of arguments laid out as the originals are, for tests that call a trace with Fortran-ordered
and strided arguments and compare the caller's arrays afterwards with eager NumPy's."""

from __future__ import annotations

import numpy as np


def layout_copy(a):
    """A copy laid out as `a` is (Fortran order, every other column of a wider array)."""
    if isinstance(a, np.ma.MaskedArray) or a.flags.c_contiguous or a.flags.f_contiguous:
        return a.copy(order="K")
    wide = np.empty((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)[..., ::2]
    wide[...] = a
    return wide


def layout_copies(args):
    return [layout_copy(a) for a in args]
