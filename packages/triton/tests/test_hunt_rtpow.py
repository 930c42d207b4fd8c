"""Hunt of branch rtpow on the Triton backend: which one-element exponents NumPy's power loop reads with
stride 0 (lowering_rules._read_with_stride_0, the cpu backend's classify.broadcast_exponent alike). See
packages/cpu/tests/test_hunt_rtpow.py for the rule and the cases no static rule matches."""

import numpy as np
import pytest
from test_numpy_agreement import _run, _same

_ONES = [(), (1,), (1, 1), (1, 1, 1)]


@pytest.mark.parametrize("x_shape", _ONES, ids=str)
@pytest.mark.parametrize("e_shape", _ONES, ids=str)
def test_a_one_element_result_branches_exactly_where_numpy_does(x_shape, e_shape):
    """Fixed: ``x(1,) ** e(1, 1)`` (a base of fewer dims, not 0-d) goes through NumPy's iterator, which
    hands the loop stride 0: NaN at -inf ** 0.5, -0.0 at -0.0 ** 0.5; the rule called it pow (+inf, +0.0)."""
    for xv in (-np.inf, -0.0):
        x, e = np.full(x_shape, xv), np.full(e_shape, 0.5)
        with np.errstate(all="ignore"):
            _same(_run("np.power", x, e), np.power(x, e))
