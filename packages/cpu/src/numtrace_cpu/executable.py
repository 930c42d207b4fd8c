"""The compiled form of one graph for one input signature, and its per-call path.

A call checks its inputs, takes an arena (the planned intermediate buffers) from a free list,
allocates the outputs (or takes the caller's `out=`), runs each step's prepared closure over a flat
environment list, and puts the arena back. Arenas are never shared by two calls in flight, so one
executable can be called from several threads at once; a call while an earlier call's outputs are
still held is fine because outputs are never arena memory.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir.backend import plain_array
from numtrace_ir.errors import execution_error, while_executing
from numtrace_ir.fp_errors import Reporter, node_errstate
from numtrace_ir.interpreter import Interpreter
from numtrace_ir.types import ScalarType, TensorType

from numtrace_cpu import blas_threads, compiler, threads
from numtrace_cpu.classify import broadcast_exponent, constant_exponent, fallback_reason
from numtrace_cpu.into import RowArg
from numtrace_cpu.isa import ISA, blocks
from numtrace_cpu.joins import JoinRestStep
from numtrace_cpu.planner import BufferPlan
from numtrace_cpu.runtime import CallRunner, FusedCall
from numtrace_cpu.steps import (
    NUMPY_STEPS,
    AssignedViewStep,
    ConstantStep,
    FallbackStep,
    FusedStep,
    IntoStep,
    LayoutViewStep,
    MatmulStep,
    PartViewStep,
    ScanStep,
    SetitemStep,
    SmallMatmulStep,
    Step,
    ViewStep,
)

__all__ = ["Executable"]

_SCALAR_PY = {"int": (int, np.integer), "float": (float, int, np.floating, np.integer),
              "bool": (bool, np.bool_), "complex": (complex, float, int, np.number)}


class Executable(CallRunner):
    """Runs one specialized graph: ``exe(*inputs, out=None) -> tuple`` of the graph's outputs.

    The call itself is `CallRunner.__call__` (Cython); this class prepares its tables and holds the
    slow paths: explaining bad inputs, checking `out=`, making arenas.
    """

    def __init__(self, graph, steps: list[Step], types: dict, plan: BufferPlan, constants: dict,
                 rewrites: dict | None = None, report: Reporter | None = None):
        self.graph = graph
        self._rewrites = dict(rewrites or {})   # graph rewrites counted for stats(): see compile_graph
        self.input_types = [v.type for v in graph.inputs]
        self._steps = steps
        self._types = types
        self._plan = plan
        # Value numbers, not a count: an in-place setitem's result shares the number of its array.
        self._template: list[Any] = [None] * (max(types, default=-1) + 1)
        # The weights of GEMV steps that are constants, copied once to a cache line (_cache_aligned).
        gemv_weights = {s.inputs[1] if s.gemv[0] == 0 else s.inputs[0] for s in steps
                        if isinstance(s, MatmulStep) and s.gemv is not None}
        for v, value in constants.items():
            self._template[v] = _cache_aligned(value) if v in gemv_weights else value
        self._outputs = [(v, types[v], _output_mode(types[v], copy, j in plan.in_place_outputs))
                         for j, (v, copy) in enumerate(zip(plan.output_values, plan.copied_outputs))]
        self._arenas_made = 0
        self._lock = threading.Lock()   # guards only the arena counter, never a kernel
        specs = [(t.dtype.num, tuple(t.shape)) if isinstance(t, TensorType) else None
                 for t in self.input_types]
        outputs = [(v, t.dtype.num if isinstance(t, TensorType) else -1,
                    tuple(t.shape) if isinstance(t, TensorType) and t.is_concrete else (), _MODE_CODES[mode])
                   for v, t, mode in self._outputs]
        self._arena_views: list[ViewStep] = []
        self._arena_views = self._views_of_arena_buffers()
        per_call = list(range(len(graph.inputs))) + [v for v, _, mode in self._outputs if mode == _DIRECT]
        once = {id(s) for s in self._arena_views}
        per_call += [v for s in steps if isinstance(s, FallbackStep) and id(s) not in once for v in s.outputs
                     if isinstance(s, ViewStep) or not isinstance(types[v], TensorType)
                     or not types[v].is_concrete]
        run = [s for s in steps if not isinstance(s, ConstantStep) and id(s) not in once]
        runners = [_runner(s, types) for s in run]
        # The GEMV kernels of the steps: stats() counts the team's work by the form each last ran.
        self._gemvs = {id(s): r for s, r in zip(run, runners) if isinstance(r, blocks.Gemv)}
        self._gathered_runners = [r for s, r in zip(run, runners) if isinstance(s, MatmulStep) and s.gather]
        self._packed_runners = [r for r in runners if isinstance(r, blocks.PackedMatmul)]
        self._small_runners = [r for r in runners if isinstance(r, _SmallMatmulRunner)]
        # NumPy's floating-point warnings and errors: see numtrace_ir.fp_errors.
        self._setup(specs, runners, outputs, sorted(set(per_call)),
                    report or Reporter(lambda: Interpreter(graph)), [isinstance(s, NUMPY_STEPS) for s in run])
        # Generated kernels for the fused passes (numtrace_cpu.compiler): until one is ready, or
        # where none is made, its pass runs on the interpreter.
        fused = [s for s in steps if isinstance(s, FusedStep)]
        self._generated = dict(zip(map(id, fused), compiler.request([s.kernel for s in fused])))

    def _views_of_arena_buffers(self) -> list[ViewStep]:
        """The view steps whose result is a view of an arena buffer: the same view of the same memory
        on every call, so each arena binds it once (`_new_arena`) and no call runs the step. Found on
        a probe arena: a step qualifies when its input is an arena value (or such a view) and what
        NumPy returns shares that memory (a reshape that has to copy does not)."""
        env = self._new_arena()
        bound = set(self._plan.slot_of)
        found = []
        for step in self._steps:
            if not (isinstance(step, ViewStep) and len(step.inputs) == 1 and step.inputs[0] in bound
                    and _view_fits(step, self._types)):
                continue
            src = env[step.inputs[0]]
            r = step.fn(src, **step.attrs)
            parts = r if len(step.outputs) > 1 else (r,)
            if all(p.size and np.shares_memory(p, src) for p in parts):
                for v, p in zip(step.outputs, parts):
                    env[v] = p
                bound.update(step.outputs)
                found.append(step)
        self._arenas_made = 0   # the probe is not an arena any call used
        return found

    # -- slow paths of the call ----------------------------------------------------------------------
    def _check_inputs(self, inputs: tuple) -> tuple:
        return tuple(_check_input(i, x, t) for i, (x, t) in enumerate(zip(inputs, self.input_types)))

    def _prepare_out(self, out: Sequence[np.ndarray], inputs: tuple) -> list:
        """The arrays the steps write: `out` itself, or fresh ones when `out` may overlap an input."""
        if any(mode in (_SCALAR, _DYNAMIC) for _, _, mode in self._outputs):
            raise ValueError("out= needs every output to be an array of a shape known before the call")
        if not isinstance(out, Sequence) or len(out) != len(self._outputs):
            got = f"{len(out)} items" if isinstance(out, Sequence) else f"a {type(out).__name__}"
            raise ValueError(f"out= must be a sequence of {len(self._outputs)} arrays, got {got}")
        for j, (o, (_, t, _)) in enumerate(zip(out, self._outputs)):
            if not isinstance(o, np.ndarray) or o.dtype != t.dtype or o.shape != tuple(t.shape):
                got = f"{o.dtype}{list(o.shape)}" if isinstance(o, np.ndarray) else type(o).__name__
                raise ValueError(f"out[{j}] must be an array of dtype {t.dtype} and shape {tuple(t.shape)}, "
                                 f"got {got}")
            if not o.flags.writeable:
                raise ValueError(f"out[{j}] is read-only")
        # Kernels write outputs while reading inputs: an out= array that may overlap an input (or
        # another output) is computed into a fresh array and copied at the end.
        overlap = any(np.may_share_memory(o, x) for o in out for x in inputs if isinstance(x, np.ndarray))
        overlap = overlap or any(np.may_share_memory(a, b) for i, a in enumerate(out) for b in out[i + 1:])
        if overlap:
            return [np.empty(t.shape, t.dtype) for _, t, _ in self._outputs]
        # An equal dtype by another type number (longlong for int64): the kernels see the compiled one.
        return [o if o.dtype.num == t.dtype.num else o.view(t.dtype)
                for o, (_, t, _) in zip(out, self._outputs)]

    def _finish_out(self, out: Sequence[np.ndarray], results: list) -> tuple:
        for o, r in zip(out, results):
            if o is not r and r.base is not o:
                np.copyto(o, r)
        return tuple(out)

    def _new_arena(self) -> list[Any]:
        """The environment template with every planned slot's views bound (one buffer per slot)."""
        buffers = [np.empty(max(n, 1), np.uint8) for n in self._plan.slot_bytes]
        env = list(self._template)
        for v, slot in self._plan.slot_of.items():
            t = self._types[v]
            nbytes = int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
            env[v] = buffers[slot][:nbytes].view(t.dtype).reshape(t.shape)
        for step in self._arena_views:
            r = step.fn(env[step.inputs[0]], **step.attrs)
            for v, p in zip(step.outputs, r if len(step.outputs) > 1 else (r,)):
                env[v] = p
        with self._lock:
            self._arenas_made += 1
        return env

    # -- introspection -----------------------------------------------------------------------------
    def stats(self) -> dict:
        """What the plan does: kernels, fused groups and their sizes, BLAS calls, fallbacks, buffers."""
        fused = [s for s in self._steps if isinstance(s, FusedStep)]
        fused_nodes = {id(n) for s in fused for n in s.nodes}
        fallbacks = [s.nodes[0].op for s in self._steps
                     if isinstance(s, FallbackStep) and not isinstance(s, ViewStep)]
        producers = {v: s for s in self._steps for v in s.outputs}
        return {
            "backend": "cpu",
            "isa": ISA,
            "threads": threads.get_num_threads(),
            "nodes": len({id(n) for s in self._steps for n in s.nodes}),
            "steps": len(self._steps),
            "kernels": len(fused) + sum(isinstance(s, (MatmulStep, ScanStep, SmallMatmulStep))
                                        for s in self._steps),
            "fused_groups": len(fused),
            "fused_nodes": len(fused_nodes),
            # elementwise nodes computed again in a later pass instead of read back (fusion.recomputable)
            "recomputed_nodes": sum(len(s.nodes) for s in fused) - len(fused_nodes),
            "fused_group_sizes": [len(s.nodes) for s in fused],
            "instructions": sum(s.kernel.n_instructions for s in fused),
            "generated_kernels": sum(s.kernel.has_generated for s in fused),
            "generated_runs": sum(s.kernel.generated_runs for s in fused),
            "generated_column_runs": sum(s.kernel.generated_column_runs for s in fused),
            "generated_row_block_runs": sum(s.kernel.generated_row_block_runs for s in fused),
            # generated runs split over the persistent thread team (blocks.pxi's _run_generated)
            "generated_team_runs": sum(s.kernel.generated_team_runs for s in fused),
            "interpreted_runs": sum(s.kernel.interpreted_runs for s in fused),
            "interpreted_team_runs": sum(s.kernel.interpreted_team_runs for s in fused),
            "rows_widened_runs": sum(s.kernel.rows_widened_runs for s in fused),
            "streamed_runs": sum(s.kernel.streamed_runs for s in fused),
            "generated_rows_runs": sum(s.kernel.generated_rows_runs for s in fused),
            # large elementwise passes with a table op run in short tiles (codegen.STEP_BYTES)
            "generated_short_tile_runs": sum(s.kernel.generated_short_tile_runs for s in fused),
            # reductions of short rows computed a tile of rows at a time (codegen's _row_tile_units)
            "generated_row_tile_runs": sum(s.kernel.generated_row_tile_runs for s in fused),
            # those tiles of rows reading a per-row operand (x[:, None] of x[:, None] == y) once a row
            "generated_row_scalar_runs": sum(s.kernel.generated_row_scalar_runs for s in fused),
            "shared_sum_runs": sum(s.kernel.shared_sum_runs for s in fused),
            "split_row_runs": sum(s.kernel.split_row_runs for s in fused),
            "extreme_rows_runs": sum(s.kernel.extreme_rows_runs for s in fused),
            "matmuls": sum(isinstance(s, MatmulStep) for s in self._steps),
            "gemv": sum(isinstance(s, MatmulStep) and s.gemv is not None for s in self._steps),
            "gemv_rows_of_x": sum(isinstance(s, MatmulStep) and s.gemv is not None and s.gemv[0] == 0
                                  and self._types[s.inputs[0]].ndim == 2
                                  and self._types[s.inputs[0]].shape[0] > 1 for s in self._steps),
            "gemv_epilogues": sum(isinstance(s, MatmulStep) and s.gemv is not None and s.bias
                                  for s in self._steps),
            "gemv_team": sum(isinstance(s, MatmulStep) and s.gemv is not None
                             and _gemv_macs(s, self._types) >= blocks.GEMV_PARALLEL_MIN for s in self._steps),
            "gemv_team_columns": sum(_gemv_column_pieces(s, self._types, self._gemvs, producers) > 1
                                     for s in self._steps),
            "gemv_team_folds": sum(_gemv_team_folds(s, self._types, self._gemvs, producers)
                                   for s in self._steps),
            # GEMVs whose last call read W's first columns apart to align its other loads (gemv.pxi)
            "gemv_peeled": sum(r.last_peeled for r in self._gemvs.values()),
            "packed_matmuls": sum(isinstance(s, MatmulStep) and s.packed is not None for s in self._steps),
            "packed_constant": sum(isinstance(s, MatmulStep) and s.packed == "constant" for s in self._steps),
            "packed_runtime": sum(isinstance(s, MatmulStep) and s.packed == "runtime" for s in self._steps),
            "packed_epilogue_ops": sum(len(s.epilogue) for s in self._steps if isinstance(s, MatmulStep)),
            # products reading B from an im2col's windows (products.gathered_operand), and their calls
            # that did (the others, on a layout the kernels do not take, stacked them with NumPy)
            "packed_gathered": len(self._gathered_runners),
            "packed_gathered_runs": sum(r.calls_gathered for r in self._gathered_runners),
            # calls of products packed per call that read B's rows where they lie (packed.pxi)
            "packed_direct_runs": sum(r.calls_direct for r in self._packed_runners),
            # calls of stacks whose leading dims do not merge (attention's heads), run on the kernels
            # at a table of each product's offsets (packed.pxi) instead of NumPy's matmul
            "packed_stack_offset_runs": sum(r.calls_stack_offsets for r in self._packed_runners),
            "folded_constants": self._rewrites.get("folded_constants", 0),
            "products_widened": self._rewrites.get("products_widened", 0),
            "constant_powers": sum(constant_exponent(n) is not None for s in fused for n in s.nodes),
            # np.power of a pass and a run-time scalar exponent, on NumPy's branch by its value
            # (nt_opcodes.h's NT_NPPOW: sqrt at 0.5, square at 2, ...) where C pow differs at -inf, -0.0
            "broadcast_powers": sum(broadcast_exponent(n) for s in fused for n in s.nodes),
            # ``s ** p`` of NumPy float scalars computed by a pass (C pow / powf: classify's
            # _scalar_power_plan), and those left to NumPy's operator (int, half, promoted operands)
            "scalar_powers": sum(n.op == "np.scalar_power" for s in fused for n in s.nodes),
            "scalar_powers_numpy": sum(s.nodes[0].op == "np.scalar_power" for s in self._steps
                                       if not isinstance(s, FusedStep)),
            "views": sum(isinstance(s, ViewStep) for s in self._steps),
            # np.split/np.array_split kept as views of their input's sections (classify.sections_view)
            "sections_as_views": sum(isinstance(s, ViewStep) and len(s.outputs) > 1 for s in self._steps),
            "parts_in_place": sum(isinstance(s, PartViewStep) for s in self._steps),
            "assigned_in_place": sum(isinstance(s, AssignedViewStep) for s in self._steps),
            "reshapes_in_place": sum(isinstance(s, LayoutViewStep) for s in self._steps),
            "scans": sum(isinstance(s, ScanStep) for s in self._steps),
            "scans_in_place": sum(isinstance(s, ScanStep) and s.inputs == s.outputs for s in self._steps),
            "small_matmuls": sum(isinstance(s, SmallMatmulStep) for s in self._steps),
            # their calls whose rows lay back to back (nt_smallk.h's vectorized loop)
            "small_matmul_packed_runs": sum(r.packed_runs for r in self._small_runners),
            # argmin/argmax calls answered by the row loop (into.RowArg) instead of NumPy's
            "row_arg_runs": sum(s.fn.runs for s in self._steps if isinstance(s, IntoStep)
                                and isinstance(s.fn, RowArg)),
            "fallbacks": len(fallbacks),
            "fallback_ops": sorted(set(fallbacks)),
            "for_guards": sum(isinstance(s, FallbackStep) and s.for_guard for s in self._steps),
            "setitems_in_place": sum(isinstance(s, SetitemStep) and s.inputs[0] == s.outputs[0]
                                     for s in self._steps),
            "host_calls": [s.nodes[0].attrs["func"] for s in self._steps
                           if s.nodes[0].op == "prim.host_call"],
            "numpy_into": sorted({s.nodes[0].op for s in self._steps
                                  if isinstance(s, (IntoStep, SetitemStep))}),
            "buffer_slots": len(self._plan.slot_bytes),
            "buffer_bytes": sum(self._plan.slot_bytes),
            "arenas": self._arenas_made,
            "in_place_outputs": sorted(self._plan.in_place_outputs),
        }

    def explain(self) -> str:
        """What this executable does per call, step by step: fused passes with the nodes each holds,
        BLAS calls, NumPy fallbacks with their reason, views, and the intermediate buffers."""
        from numtrace_ir.printer import format_node, value_names

        names = value_names(self.graph)
        by_number = {n: v for v, n in _numbering(self.graph).items()}

        def name(k: int) -> str:
            v = by_number.get(k)
            return "%" + names[v] if v is not None else f"%{k}"

        def node_line(node) -> str:
            return format_node(node, True)

        s = self.stats()
        sig = ", ".join(f"%{names[v]} : {v.type}" for v in self.graph.inputs)
        work = sum(not isinstance(step, ConstantStep) for step in self._steps)
        into = sum(isinstance(step, (IntoStep, SetitemStep)) for step in self._steps)
        lines = [f"cpu executable for ({sig})",
                 f"  {_count(s['nodes'], 'node')} in {_count(work, 'step')}: "
                 f"{_count(s['fused_groups'], 'fused pass', 'fused passes')}, "
                 f"{_count(s['matmuls'] - s['gemv'] - s['packed_matmuls'], 'BLAS call')}, "
                 f"{_count(s['gemv'], 'GEMV kernel')}, "
                 + "".join(f"{_count(s[key], what)}, " for key, what in _OPTIONAL_COUNTS if s[key]) +
                 f"{_count(into, 'NumPy call into a buffer', 'NumPy calls into buffers')}, "
                 f"{_count(s['fallbacks'], 'NumPy fallback')}, {_count(s['views'], 'view')}; "
                 f"ISA {s['isa']}, {_count(s['threads'], 'thread')}"]
        k = 0
        for step in self._steps:
            if isinstance(step, ConstantStep):
                continue
            k += 1
            if isinstance(step, FusedStep):
                outs = ", ".join(f"{name(v)} : {self._types[v]}" for v in step.outputs)
                lines.append(f"  step {k}: fused pass of {_count(len(step.nodes), 'node')} "
                             f"({_work(step.kernel.stats())}) -> {outs}")
                lines.extend(f"      {node_line(n)}" for n in step.nodes)
                lines.extend(_generated_lines(self._generated[id(step)]))
            elif isinstance(step, MatmulStep):
                a, b = (self._types[v] for v in step.inputs[:2])
                if step.gather:
                    b = (f"{step.nodes[1].outputs[0].type} (read from the {step.gather[0]} stacked windows "
                         f"in place, never stacked)")
                how = ("GEMV kernel" if step.gemv is not None else "BLAS matmul" if step.packed is None
                       else "packed-weight kernel (weight packed once)" if step.packed == "constant"
                       else "packed-weight kernel (module state, packed per call)" if step.packed == "state"
                       else "packed kernel (run-time operand, packed per call)")
                epi = (" + bias" if step.bias else "") + (" then ReLU" if step.activation else "")
                epi += "".join(f" then {op}" if v is None else f" + {op} {name(v)}"
                               for op, v in step.epilogue_values())
                lines.append(f"  step {k}: {how} {a} @ {b}{epi} -> {self._types[step.outputs[0]]}")
                lines.extend(f"      {node_line(n)}" for n in step.nodes)
            elif isinstance(step, ScanStep):
                where = (f"of {name(step.inputs[0])}" if step.inputs != step.outputs
                         else "in place, over the values the previous pass wrote there")
                along = "of the C-order ravel" if step.flatten else f"along axis {step.axis}"
                lines.append(f"  step {k}: {('cumsum', 'cumprod')[step.op]} scan {along} "
                             f"{where} -> {name(step.outputs[0])} : {self._types[step.outputs[0]]}")
                lines.append(f"      {node_line(step.nodes[0])}")
            elif isinstance(step, SmallMatmulStep):
                a, b = (self._types[v] for v in step.inputs)
                lines.append(f"  step {k}: small-K product pass (K = {a.shape[-1]}, in-order sums) {a} @ {b} "
                             f"-> {self._types[step.outputs[0]]}")
                lines.append(f"      {node_line(step.nodes[0])}")
            elif isinstance(step, PartViewStep):
                lines.append(f"  step {k}: {name(step.outputs[0])} is a view of {name(step.inputs[0])}: "
                             f"the pass computing it writes it into the joined array")
            elif isinstance(step, LayoutViewStep):
                lines.append(f"  step {k}: {name(step.outputs[0])} is a view of {name(step.inputs[0])}: "
                             f"the step computing it writes it in the layout of the reshape")
                lines.extend(f"      {node_line(n)}" for n in step.nodes)
            elif isinstance(step, AssignedViewStep):
                lines.append(f"  step {k}: {name(step.outputs[0])} is a view of {name(step.inputs[0])}: "
                             f"the pass computing it writes it in place of the assignment")
                lines.append(f"      {node_line(step.nodes[0])}")
            elif isinstance(step, ViewStep):
                lines.append(f"  step {k}: view {node_line(step.nodes[0])}")
            elif isinstance(step, JoinRestStep):
                lines.append(f"  step {k}: the parts not written in place copied into "
                             f"{name(step.outputs[0])}: " + ", ".join(name(v) for v in step.inputs))
            elif isinstance(step, IntoStep):
                what = ("row loop (NumPy's on an input not contiguous)" if isinstance(step.fn, RowArg)
                        else "NumPy's loop")
                lines.append(f"  step {k}: {what} writing into the planned buffer")
                lines.append(f"      {node_line(step.nodes[0])}")
            elif isinstance(step, SetitemStep):
                what = "NumPy's scatter" if step.scatter is not None else "assignment"
                lines.append(f"  step {k}: {what} into the planned buffer (copied first unless in place)")
                lines.append(f"      {node_line(step.nodes[0])}")
            else:
                node = step.nodes[0]
                why = (fallback_reason(node) if not getattr(step, "for_guard", False)
                       else "feeds a guard on data, which needs NumPy's own bits")
                lines.append(f"  step {k}: fallback to NumPy ({why})")
                lines.append(f"      {node_line(node)}")
        in_place = [f"output {j} into input {name(v)}" for j, (v, _, mode) in enumerate(self._outputs)
                    if mode == _IN_PLACE]
        lines.append(f"  buffers: {_count(s['buffer_slots'], 'reused intermediate slot')}, "
                     f"{s['buffer_bytes']} bytes per call in flight; outputs are fresh arrays"
                     + (f" except {', '.join(in_place)} (computed in place)" if in_place else ""))
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        s = self.stats()
        return (f"<numtrace_cpu.Executable: {s['nodes']} nodes in {s['steps']} steps, "
                f"{s['fused_groups']} fused groups, {s['fallbacks']} fallbacks>")


# How each graph output reaches the caller, and CallRunner's code for it (2: the environment's object
# as it is, which for an in-place output is the input array the steps wrote into).
_DIRECT, _COPY, _SCALAR, _DYNAMIC, _IN_PLACE = "direct", "copy", "scalar", "dynamic", "in place"
_MODE_CODES = {_DIRECT: 0, _COPY: 1, _SCALAR: 2, _DYNAMIC: 3, _IN_PLACE: 2}


def _output_mode(t: Any, copy: bool, in_place: bool) -> str:
    """direct: steps write the caller's array; copy: copied in at the end (an input, a constant, a
    repeat); scalar: a Python scalar; dynamic: a shape only known after the run (data-dependent);
    in place: the steps wrote it into an input's memory, and the output is that input array."""
    if not isinstance(t, TensorType):
        return _SCALAR
    if not t.is_concrete:
        return _DYNAMIC
    if in_place:
        return _IN_PLACE
    return _COPY if copy else _DIRECT


def _check_input(i: int, x: Any, t: Any) -> Any:
    """x, checked against type t (a NumPy scalar for a 0-d tensor becomes a 0-d array)."""
    if isinstance(t, TensorType):
        if isinstance(x, np.generic) and t.ndim == 0:
            x = np.asarray(x)
        if not isinstance(x, np.ndarray):
            raise TypeError(f"input {i} must be a numpy.ndarray of {t}, got {type(x).__name__}")
        if type(x) is not np.ndarray:
            x = plain_array(x, f"input {i}")
        if x.dtype != t.dtype:
            raise TypeError(f"input {i} has dtype {x.dtype}; this executable was compiled for {t}")
        if x.shape != t.shape:
            raise ValueError(f"input {i} has shape {x.shape}; this executable was compiled for {t}")
        if x.dtype.num != t.dtype.num:   # an equal dtype by another type number (longlong for int64)
            x = x.view(t.dtype)
    elif isinstance(t, ScalarType):
        if not isinstance(x, _SCALAR_PY[t.kind]) or (t.kind != "bool" and isinstance(x, (bool, np.bool_))):
            raise TypeError(f"input {i} must be a Python {t.kind}, got {type(x).__name__}")
    return x


def _generated_lines(job: compiler.Job) -> list[str]:
    """A fused pass's generated kernel in explain(): its state, cache path and source."""
    where = f" at {job.path}" if job.path else ""
    lines = [f"      generated C kernel: {job.state}{where}"]
    if job.source:
        lines.extend(f"        | {line}" for line in job.source.rstrip("\n").split("\n"))
    return lines


def _work(kernel_stats: dict) -> str:
    """What one fused pass computes per element: its elementwise instructions and the reductions that
    fold its values (a reduction is no instruction: the kernel accumulates it after the instructions)."""
    parts = [_count(kernel_stats[key], what) for key, what in (("instructions", "elementwise instruction"),
                                                               ("reductions", "reduction"))
             if kernel_stats[key]]
    return ", ".join(parts) or "no computation"


# What explain()'s first line counts when the plan has any: stats() key, what one of them is.
_OPTIONAL_COUNTS = (("packed_matmuls", "packed product"), ("scans", "scan"),
                    ("small_matmuls", "small-K product"), ("folded_constants", "folded constant"),
                    ("products_widened", "widened product"))


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _numbering(graph) -> dict:
    """Value -> number, as `lowering.lower` numbers them (inputs, then node outputs in order)."""
    index = {v: k for k, v in enumerate(graph.inputs)}
    for node in graph.nodes:
        for v in node.outputs:
            index[v] = len(index)
    return index


def _where(step: Step) -> str:
    return while_executing(step.nodes[-1])


# The aligned copies of constants, by the id of the constant (which is alive while listed): one
# copy for all the executables of a graph (one per input signature), dropped with the constant.
_ALIGNED: dict[int, np.ndarray] = {}


def _cache_aligned(value: Any) -> Any:
    """A C-ordered numeric array of a page or more, copied to a 64-byte boundary (NumPy aligns to 16
    bytes), so that a GEMV reads its rows as whole cache lines (gemv.pxi); any other value as it is.
    Only a GEMV's weights are copied: the graph keeps its own copy of every constant, and the
    executables of its signatures share one aligned copy of it (_ALIGNED)."""
    if (not isinstance(value, np.ndarray) or value.nbytes < 4096 or value.dtype.kind not in "biufc"
            or not value.flags.c_contiguous or value.ctypes.data % 64 == 0):
        return value
    held = _ALIGNED.get(id(value))
    if held is not None:
        return held
    raw = np.empty(value.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + value.nbytes].view(value.dtype).reshape(value.shape)
    out[...] = value
    out.flags.writeable = value.flags.writeable
    _ALIGNED[id(value)] = out
    weakref.finalize(value, _ALIGNED.pop, id(value), None)
    return out


def _runner(step: Step, types: dict):
    """What CallRunner runs for a step: a FusedCall, or a closure `run(env, nthreads)`."""
    if isinstance(step, FusedStep):
        return _fused_runner(step)
    if isinstance(step, MatmulStep):
        return _matmul_runner(step, types)
    if isinstance(step, ViewStep):
        return _view_runner(step, types)
    if isinstance(step, ScanStep):
        return _scan_runner(step)
    if isinstance(step, SmallMatmulStep):
        return _SmallMatmulRunner(step)
    if isinstance(step, IntoStep):
        return _into_runner(step)
    if isinstance(step, SetitemStep):
        return _setitem_runner(step)
    assert isinstance(step, FallbackStep), type(step).__name__  # every other kind is handled above
    return _fallback_runner(step, types)


def _matmul_runner(step: MatmulStep, types: dict):
    """NumPy's matmul then the fused epilogue as NumPy ops; wrapped in the GEMV or packed-weight
    kernel when the step has one (which runs this for layouts it does not take)."""
    if step.packed is not None:
        return _packed_runner(step, types)
    a, b, *bias = step.inputs
    (o,) = step.outputs
    c = bias[0] if bias else None
    matmul, add, maximum = np.matmul, np.add, np.maximum
    act = step.activation

    def run_matmul(env, nthreads):
        out = env[o]
        matmul(env[a], env[b], out=out)
        if c is not None:
            add(out, env[c], out=out)
        if act == "relu":
            maximum(out, 0, out=out)
        elif act == "relu_zero_first":
            maximum(0, out, out=out)
    on_blas = blas_threads.one_thread(run_matmul)
    if step.gemv is None:
        return on_blas
    vec_pos, k_axis = step.gemv
    vec, mat = (a, b) if vec_pos == 0 else (b, a)
    return blocks.Gemv(vec, mat, o, k_axis, types[o].dtype.type, -1 if c is None else c, act, on_blas)


def _gemv_macs(step: MatmulStep, types: dict) -> int:
    """Multiply-adds of a GEMV step: what decides whether it splits over the thread team."""
    assert step.gemv is not None
    vec_pos, k_axis = step.gemv
    mat = types[step.inputs[1 - vec_pos]]
    return math.prod(types[step.outputs[0]].shape) * mat.shape[k_axis]


def _gemv_team_rows_shape(step: Step, types: dict, gemvs: dict, producers: dict
                          ) -> tuple[int, int, int] | None:
    """(K, N, itemsize) of a team GEMV step that runs the rows form (its matrix's summed axis K the
    outer one in memory), else None. The form is the one the step's kernel ran at its last call (the
    matrix's layout at that call, `Gemv.last_form`); before any call, `_traced_form`."""
    if not isinstance(step, MatmulStep) or step.gemv is None:
        return None
    vec_pos, k_axis = step.gemv
    ran = gemvs[id(step)].last_form if id(step) in gemvs else None
    if (ran or _traced_form(step, producers)) != "rows":
        return None
    if _gemv_macs(step, types) < blocks.GEMV_PARALLEL_MIN:
        return None
    mat = types[step.inputs[1 - vec_pos]]
    return mat.shape[k_axis], mat.shape[1 - k_axis], mat.dtype.itemsize


def _traced_form(step: MatmulStep, producers: dict) -> str:
    """The GEMV form of a call with C-ordered arguments: "rows" where the matrix's summed axis is its
    outer one, each transpose view between an argument (or a buffer) and the matrix that reverses the
    two axes swapping them (np.transpose(w, (0, 1)) keeps them)."""
    assert step.gemv is not None
    vec_pos, k_axis = step.gemv
    value, flips = step.inputs[1 - vec_pos], 0
    while isinstance(producers.get(value), ViewStep) and producers[value].nodes[0].op == "np.transpose":
        axes = producers[value].nodes[0].attrs.get("axes")
        flips += axes is None or tuple(a % 2 for a in axes) == (1, 0)
        value = producers[value].inputs[0]
    return "rows" if (k_axis == 0) != bool(flips % 2) else "dots"


def _gemv_column_pieces(step: Step, types: dict, gemvs: dict, producers: dict) -> int:
    """How many column ranges a team GEMV step of the rows form cuts each row chunk into at the
    current thread count (1: none, or not such a step)."""
    rows = _gemv_team_rows_shape(step, types, gemvs, producers)
    return 1 if rows is None else blocks.gemv_column_pieces(*rows, threads.get_num_threads())


def _gemv_team_folds(step: Step, types: dict, gemvs: dict, producers: dict) -> bool:
    """Whether a team GEMV step of the rows form folds its row chunks' partials on the team at the
    current thread count (gemv.pxi's _gemv_fold_unit)."""
    rows = _gemv_team_rows_shape(step, types, gemvs, producers)
    return rows is not None and blocks.gemv_team_folds(rows[0], threads.get_num_threads())


def _packed_runner(step: MatmulStep, types: dict):
    """The packed-weight kernel, with NumPy's matmul and epilogue ops in order as its fallback (for a
    gathered B, NumPy's stack of the windows and its reshape first)."""
    a, b = step.inputs[:2]
    (o,) = step.outputs
    matmul, add, maximum, stack = np.matmul, np.add, np.maximum, np.stack
    ops = step.epilogue_values()
    count, axis, rshape = step.gather or (0, 0, ())
    windows = step.inputs[1:1 + count]

    def run_matmul_epilogue(env, nthreads):
        out = env[o]
        if count:
            matmul(env[a], stack([env[w] for w in windows], axis=axis).reshape(rshape), out=out)
        else:
            matmul(env[a], env[b], out=out)
        for name, v in ops:
            if v is not None:
                add(out, env[v], out=out)
            elif name == "relu":
                maximum(out, 0, out=out)
            else:
                maximum(0, out, out=out)
    return blocks.PackedMatmul(a, b, o, types[o].dtype.type, ops, step.packed == "constant",
                               blas_threads.one_thread(run_matmul_epilogue), tuple(windows), axis, rshape)


def _into_runner(step: IntoStep):
    fn, ins, outs = _in_errstate(step.fn, step.nodes), step.inputs, step.outputs
    if len(outs) > 1:
        def run_into_several(env, nthreads):
            try:
                fn(*[env[i] for i in ins], out=tuple(env[o] for o in outs))
            except Exception as exc:
                raise execution_error(step.nodes[-1], exc) from exc
        return run_into_several
    (o,) = outs

    def run_into(env, nthreads):
        try:
            fn(*[env[i] for i in ins], out=env[o])
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
    return run_into


def _scan_runner(step: ScanStep):
    """``blocks.scan(a, out, axis, op, nthreads)``, with nothing built per call (a small scan is
    mostly per-call cost)."""
    scan, (a,), (o,), axis, op = blocks.scan, step.inputs, step.outputs, step.axis, step.op
    if step.flatten:
        def run_flat_scan(env, nthreads):   # a view when the input is C-contiguous, else a copy
            try:
                scan(env[a].reshape(-1), env[o], 0, op, nthreads)
            except Exception as exc:
                raise execution_error(step.nodes[-1], exc) from exc
        return run_flat_scan

    def run_scan(env, nthreads):
        try:
            scan(env[a], env[o], axis, op, nthreads)
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
    return run_scan


class _SmallMatmulRunner:
    """A small-K product step; `packed_runs` counts the calls whose rows lay back to back, which
    nt_smallk.h's vectorized loop computed (stats()["small_matmul_packed_runs"])."""

    __slots__ = ("step", "a", "b", "o", "packed_runs")

    def __init__(self, step: SmallMatmulStep):
        (self.a, self.b), (self.o,) = step.inputs, step.outputs
        self.step, self.packed_runs = step, 0

    def __call__(self, env, nthreads):
        try:
            if blocks.small_k_matmul(env[self.a], env[self.b], env[self.o], nthreads):
                self.packed_runs += 1
        except Exception as exc:
            raise execution_error(self.step.nodes[-1], exc) from exc


def _setitem_runner(step: SetitemStep):
    if step.scatter is not None:
        return _scatter_runner(step)
    a, *key_ins, value = step.inputs
    (o,) = step.outputs
    index = step.index
    copyto = np.copyto
    if not key_ins:
        key = tuple(index)

        def run_setitem(env, nthreads):
            out = env[o]
            if o != a:   # else the lowering gave the result the updated array's own buffer
                copyto(out, env[a])
            try:
                out[key] = env[value]
            except Exception as exc:
                raise execution_error(step.nodes[-1], exc) from exc
        return _in_errstate(run_setitem, step.nodes)

    def run_setitem_keyed(env, nthreads):
        out = env[o]
        if o != a:
            copyto(out, env[a])
        it = iter(key_ins)
        key = tuple(env[next(it)] if e == "input" else e for e in index)
        try:
            out[key] = env[value]
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
    return _in_errstate(run_setitem_keyed, step.nodes)


def _scatter_runner(step: SetitemStep):
    a, *operands = step.inputs
    (o,) = step.outputs
    scatter, copyto = step.scatter, np.copyto

    def run_scatter(env, nthreads):
        out = env[o]
        if o != a:   # else the lowering gave the result the updated array's own buffer
            copyto(out, env[a])
        try:
            scatter(out, *[env[k] for k in operands])
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
    return _in_errstate(run_scatter, step.nodes)


def _fused_runner(step: FusedStep) -> FusedCall:
    scalars = [(k, dt) for k, dt in enumerate(step.scalar_inputs) if dt is not None]
    return FusedCall(step.kernel, step.inputs + step.outputs, scalars)


def _view_runner(step: ViewStep, types: dict):
    if len(step.outputs) > 1:
        return _sections_runner(step, types)
    fn, attrs, ins, (out,) = step.fn, step.attrs, step.inputs, step.outputs
    t = types[out]
    if len(ins) == 1 and not attrs and _view_fits(step, types):
        (a,) = ins

        def run_view_of_one(env, nthreads):   # a per-call view of an input: no checks left to do
            env[out] = fn(env[a])
        return run_view_of_one

    def run_view(env, nthreads):
        try:
            r = fn(*[env[i] for i in ins], **attrs)
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
        if type(r) is not np.ndarray:   # e.g. np.flip of a 0-d array returns a NumPy scalar
            r = np.asarray(r)
        if r.dtype != t.dtype or r.shape != t.shape:
            raise RuntimeError(f"{_where(step)}: the reference returned {r.dtype}{list(r.shape)}, "
                               f"the op's rule says {t}")
        env[out] = r
    return run_view


def _sections_runner(step: ViewStep, types: dict):
    """A view step with several outputs (classify.sections_view): each output is its view."""
    fn, (a,), outs = step.fn, step.inputs, step.outputs
    if _view_fits(step, types):
        def run_sections(env, nthreads):   # the views' types follow from the input's: nothing to check
            for v, r in zip(outs, fn(env[a])):
                env[v] = r
        return run_sections
    expected = [types[v] for v in outs]

    def run_checked_sections(env, nthreads):
        try:
            parts = fn(env[a])
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
        for v, t, r in zip(outs, expected, parts, strict=True):
            if type(r) is not np.ndarray or r.dtype != t.dtype or r.shape != t.shape:
                raise RuntimeError(f"{_where(step)}: the reference returned {np.asarray(r).dtype}"
                                   f"{list(np.shape(r))}, the op's rule says {t}")
            env[v] = r
    return run_checked_sections


def _view_fits(step: ViewStep, types: dict) -> bool:
    """Whether the view step of one input gives an ndarray of its output's type for any array of its
    input's type: a movement op's result type depends only on the input's dtype and shape, so one
    probe (a broadcast scalar, no memory) settles it at build time and the runner needs no check."""
    t_in, t_outs = types[step.inputs[0]], [types[v] for v in step.outputs]
    if not (isinstance(t_in, TensorType) and t_in.is_concrete
            and all(isinstance(t, TensorType) for t in t_outs)):
        return False
    try:
        r = step.fn(np.broadcast_to(np.zeros((), t_in.dtype), t_in.shape), **step.attrs)
    except Exception:
        return False
    parts = r if len(t_outs) > 1 else (r,)
    return (type(parts) is tuple and len(parts) == len(t_outs)
            and all(type(p) is np.ndarray and p.dtype == t.dtype and p.shape == tuple(t.shape)
                    for p, t in zip(parts, t_outs)))


def _in_errstate(fn, nodes):
    """`fn` in the error state the traced function set around its node (`Node.errstate`), if any."""
    state = node_errstate(nodes[-1]) if nodes else None
    if state is None:
        return fn

    def run_in_errstate(*args, **kwargs):
        with np.errstate(**state):
            return fn(*args, **kwargs)
    return run_in_errstate


def _fallback_runner(step: FallbackStep, types: dict):
    fn, attrs, ins, outs = _in_errstate(step.fn, step.nodes), step.attrs, step.inputs, step.outputs
    out_types = [types[v] for v in outs]
    (t,) = out_types if len(outs) == 1 else (None,)
    if isinstance(t, TensorType) and t.is_concrete:
        (v,), dtype, shape = outs, t.dtype, tuple(t.shape)

        def run_one(env, nthreads):   # one array of a known type (a host call's result): a tuple compare
            try:
                r = fn(*[env[i] for i in ins], **attrs)
            except Exception as exc:
                raise execution_error(step.nodes[-1], exc) from exc
            if type(r) is not np.ndarray or r.dtype != dtype or r.shape != shape:
                r = np.asarray(r)
                if r.dtype != dtype or r.shape != shape:
                    raise RuntimeError(f"{_where(step)}: the reference returned {r.dtype}{list(r.shape)}, "
                                       f"the op's rule says {t}")
            np.copyto(env[v], r)
        return run_one

    def run_fallback(env, nthreads):
        try:
            result = fn(*[env[i] for i in ins], **attrs)
        except Exception as exc:
            raise execution_error(step.nodes[-1], exc) from exc
        results = result if len(outs) > 1 else (result,)
        for v, t, r in zip(outs, out_types, results):
            if isinstance(t, TensorType) and not t.is_concrete:   # data-dependent shape: no buffer
                r = np.asarray(r)
                if r.dtype != t.dtype or r.ndim != t.ndim:
                    raise RuntimeError(f"{_where(step)}: the reference returned {r.dtype}{list(r.shape)}, "
                                       f"the op's rule says {t}")
                # A view could point into an arena buffer that a later step reuses: keep a copy.
                env[v] = r if r.base is None else r.copy()
            elif isinstance(t, TensorType):
                r = np.asarray(r)
                if r.dtype != t.dtype or r.shape != tuple(t.shape):
                    raise RuntimeError(f"{_where(step)}: the reference returned {r.dtype}{list(r.shape)}, "
                                       f"the op's rule says {t}")
                np.copyto(env[v], r)
            else:
                env[v] = r
    return run_fallback
