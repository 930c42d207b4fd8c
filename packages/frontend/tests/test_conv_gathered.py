"""nn.Conv2d traced on the cpu backend: its im2col product reads the stacked windows in place (the stack
is never made), with the same answers as the untraced module at other batch sizes, odd spatial sizes,
strides, padding, and a non-contiguous input."""

import numpy as np
import numtrace as nt
import pytest
from numtrace import nn
from numtrace_ir.testing import assert_outputs_close

pytestmark = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="needs the cpu backend")


class _Net(nt.Module):
    def __init__(self, cin, cout, kernel, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, seed=0)

    def forward(self, x):
        return np.maximum(self.conv(x), 0)


@pytest.mark.parametrize("cin, cout, kernel, stride, padding, size", [
    (1, 8, 3, 1, 1, (28, 28)), (8, 16, 3, 2, 0, (28, 28)), (3, 9, (2, 3), (2, 1), (1, 0), (11, 6)),
    (2, 12, 1, 1, 0, (5, 7))])
def test_conv_reads_its_windows_in_place(cin, cout, kernel, stride, padding, size):
    rng = np.random.default_rng(0)
    net = _Net(cin, cout, kernel, stride, padding).eval()
    example = rng.random((4, cin, *size)).astype(np.float32)
    traced = nt.trace(net, (example,), backend="cpu")
    big = rng.random((3, cin + 1, size[0] + 2, 2 * size[1])).astype(np.float32)
    for x in (example, rng.random((1, cin, *size)).astype(np.float32), big[:, 1:, 1:-1, ::2],
              rng.random((7, cin, *size)).astype(np.float32)):
        assert_outputs_close(traced(x), net(x), what=f"conv at {x.shape}")
    stats = list(traced.forward.stats()["signatures"].values())
    assert all(s["packed_gathered"] == 1 for s in stats)
    # every call above read the windows in place (the trace's own check calls it too)
    assert sum(s["packed_gathered_runs"] for s in stats) >= 4
