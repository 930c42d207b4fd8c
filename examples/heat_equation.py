"""A scientific workload: explicit time steps of the 2-D heat equation on a batch of plates.

Plain NumPy as a user would write it: a five-point Laplacian on the interior, fixed (Dirichlet)
edges, a source term, and a fixed number of steps unrolled into the trace. The grid size is read
from the input's shape, so one trace runs any batch and grid: traced on 4 plates of 32x32, checked
on other sizes, saved and loaded, then run on fresh plates of another size, compared with NumPy
and timed against it. Exits with status 1 on any mismatch.

    python examples/heat_equation.py [--backend cpu|reference|triton] [--quick]
"""

from __future__ import annotations

import sys

import numpy as np
from _harness import parse_args, run

ALPHA = 0.2     # diffusion number: stable for <= 0.25
STEPS = 10


def diffuse(u, source):
    """``STEPS`` explicit Euler steps of du/dt = laplacian(u) + source, edges held at their values."""
    for _ in range(STEPS):
        lap = np.zeros_like(u)
        lap[:, 1:-1, 1:-1] = (u[:, :-2, 1:-1] + u[:, 2:, 1:-1] + u[:, 1:-1, :-2] + u[:, 1:-1, 2:]
                              - 4.0 * u[:, 1:-1, 1:-1])
        u = u + ALPHA * lap + 0.01 * source
        u[:, 0, :], u[:, -1, :], u[:, :, 0], u[:, :, -1] = 0.0, 0.0, 0.0, 0.0
    return u


def main() -> int:
    args = parse_args(__doc__)
    rng = np.random.default_rng(0)

    def plates(batch, n):
        return (rng.random((batch, n, n)), rng.random((batch, n, n)))

    fresh = plates(4, 64) if args.quick else plates(16, 256)
    return run("heat_equation", diffuse, plates(4, 32), [plates(1, 8), plates(2, 50)], fresh,
               backend=args.backend, quick=args.quick, rtol=1e-9, atol=1e-12)


if __name__ == "__main__":
    sys.exit(main())
