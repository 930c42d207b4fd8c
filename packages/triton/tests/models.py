"""The end-to-end models every backend must run (defined once, in the frontend's tests) and the concrete
types a backend compiles them for."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numtrace_ir.testing import type_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frontend" / "tests"))
from e2e_models import CNN, MLP, Block, model_cases

__all__ = ["CNN", "MLP", "Block", "graph_and_types", "model_cases"]


def graph_and_types(traced, x: np.ndarray) -> tuple:
    """A traced module's forward graph and the concrete types of one call (input, then weights)."""
    forward = traced.methods["forward"]
    state = traced.state_dict()
    return traced.graph, [type_of(x)] + [type_of(np.asarray(state[n])) for n in forward.state_names]
