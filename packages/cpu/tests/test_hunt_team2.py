"""Hunt of the thread team's two job slots (nt_team.h: job gen in jobs[gen & 1], a worker entering a
slot before it reads `ready`, the caller clearing `ready` before it looks for users). The C harness
team_stress.c runs nt_team.h directly, with delays at the protocol's windows and the back-off off, so
that slots are reused while workers are late: every unit once, ordered folds in turn, no unit of a
finished job (its argument is poisoned), a worker's overflow at the caller, a forked child's own
team. The Python checks run short team jobs (generated and interpreted passes, GEMVs, row argmax,
packed products, stacks of them) back to back with the thread count changing between jobs (1..7 on
2 cores), at several spins, from one or two Python threads: one thread's bits every time (a forked
child's Python calls run on one thread, see test_hunt_team.py; the harness forks at the C level)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler, get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

HERE = pathlib.Path(__file__).parent
SRC = HERE.parent / "src" / "numtrace_cpu"
# Where team_stress.c's NT_TEAM_HOOK(k) delays go (a regex per window, matched once in nt_team.h).
# Windows: a worker that read gen but has not entered the slot, one in the slot that has not read
# `ready`, one leaving the slot, the caller between its post and its own units, a claimed unit not run.
_HOOKS = [
    r"\n(\s*)nt_team_job_t \*j = &nt_team\.jobs\[seen & 1u\];",
    r"\n(\s*)if \(atomic_load_explicit\(&j->ready, memory_order_seq_cst\)\) \{",
    r"\n(\s*)atomic_fetch_sub_explicit\(&j->users, 1, memory_order_release\);",
    r"\n(\s*)mine = nt_team_work\(j, 0\);",
    r"\n(\s*)j->fn\(j->arg, u\);",
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> pathlib.Path:
    """team_stress.c built against a copy of nt_team.h with the hooks in and the back-off off, with the
    package's floating-point flags (setup.py's FLAGS)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("team_stress")
    text = (SRC / "nt_team.h").read_text()
    for k, pattern in enumerate(_HOOKS):
        text, n = re.subn(pattern, lambda m, k=k: f"\n{m.group(1)}NT_TEAM_HOOK({k});{m.group(0)}", text,
                          count=1)
        assert n == 1, f"nt_team.h changed: update the hook at {pattern!r}"
    text, n = re.subn(r"#define NT_TEAM_MISSES \d+", "#define NT_TEAM_MISSES 1000000000", text)
    assert n == 1
    (out / "nt_team.h").write_text(text)
    shutil.copy(SRC / "nt_fpflags.h", out / "nt_fpflags.h")
    exe = out / "team_stress"
    subprocess.run([cc, "-O3", "-std=gnu11", "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math",
                    "-pthread", f"-I{out}", str(HERE / "team_stress.c"), "-o", str(exe), "-lm"], check=True)
    return exe


def _stress(exe: pathlib.Path, *args, cpus: set[int] | None = None) -> str:
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=90,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout
    return proc.stdout


@pytest.mark.parametrize("callers, iters, maxteam, one_core", [(1, 2000, 4, False), (2, 1000, 7, False),
                                                               (1, 1000, 3, True)])
def test_slots_reused_under_late_workers_run_every_unit_once(harness, callers, iters, maxteam, one_core):
    """Short jobs back to back with workers delayed in every window of the slot handshake (and, on
    one core, preempted in them): each unit runs once, ordered units in turn, no unit of a finished
    job runs, a unit's overflow reaches its caller; the team took some jobs and some slots were
    found still in use (solo_lagging), so the handshake's both sides were reached."""
    cpus = {min(os.sched_getaffinity(0))} if one_core else None
    out = _stress(harness, callers, iters, maxteam, 0, 1, cpus=cpus)
    counts = dict(zip(out.split()[::2], map(int, out.split()[1::2])))
    assert counts["errors"] == counts["stale"] == 0
    assert counts["shared"] > 0 and counts["solo_lagging"] > 0, out


@pytest.mark.parametrize("callers", [1, 2])
def test_child_forked_while_workers_spin_runs_its_own_team(harness, callers):
    """fork() right after a job, the parent's workers spinning in or between the two slots: the child
    starts a fresh team (no workers, both slots empty) and its jobs run every unit once, some on its
    own workers; with a second caller (which may hold the team at the fork: the child's then stays
    held, and its jobs run alone) they still run every unit once and do not hang."""
    out = _stress(harness, callers, 1500 // callers, 4, 1, 1)
    assert out.startswith("errors 0 stale 0"), out


def test_workers_that_cannot_start_count_as_held_not_lagging(harness):
    """A job whose workers cannot be started (no address space for their stacks) runs alone; it is
    a solo_held run, as team_counts() documents, not solo_lagging (no worker was in the slot: the
    counter blamed a late worker)."""
    out = _stress(harness, "nothreads")
    assert "lagging 0 held 1" in out, out


F32 = np.dtype(np.float32)
N = (1 << 20) + 13   # two threads' worth of a pass (PARALLEL_MIN_WORK), a part chunk at the end


def _graph(build):
    """A compiled graph from build(g) -> (inputs' types, outputs)."""
    g = Graph()
    types, outs = build(g)
    g.set_outputs(outs)
    return compile_graph(g, types)


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _programs(rng):
    """(compiled program, inputs) for each kind of team job: an elementwise pass whose last chunk
    overflows (exp of 200 in float32), a row sum, a row argmax, a GEMV with bias and ReLU, a packed
    product, a stack of products (jobs back to back within one call)."""
    def ew(g):
        a, b = g.add_input("a", TensorType(F32, (N,))), g.add_input("b", TensorType(F32, (N,)))
        return [a.type, b.type], [_op(g, "np.multiply", _op(g, "np.exp", a), b)]

    def rowsum(g):
        a = g.add_input("a", TensorType(np.dtype(np.float64), (4096, 300)))
        return [a.type], [_op(g, "np.sum", a, axis=1)]

    def argmax(g):
        a = g.add_input("a", TensorType(np.dtype(np.float64), (4096, 300)))
        return [a.type], [_op(g, "np.argmax", a, axis=1)]

    def gemv(g):
        x, w, b = (g.add_input(n, TensorType(F32, s)) for n, s in (("x", (1, 1024)), ("w", (1024, 512)),
                                                                 ("b", (512,))))
        zero = _op(g, "prim.Constant", value=0)
        y = _op(g, "np.add", _op(g, "np.matmul", x, w), b)
        return [x.type, w.type, b.type], [_op(g, "np.maximum", y, zero)]

    def packed(g):
        x, w = g.add_input("x", TensorType(F32, (64, 256))), g.add_input("w", TensorType(F32, (256, 256)))
        return [x.type, w.type], [_op(g, "np.matmul", x, w)]

    def stack(g):   # a stack of products: several team jobs per call on one argument block (packed.pxi)
        x, w = g.add_input("x", TensorType(F32, (16, 64))), g.add_input("w", TensorType(F32, (600, 64, 64)))
        return [x.type, w.type], [_op(g, "np.matmul", x, w)]

    a = rng.standard_normal(N).astype(F32)
    a[-5:] = 200
    m = rng.standard_normal((4096, 300))
    m[::7, 3] = np.nan
    ins = [(a, rng.standard_normal(N).astype(F32)), (m,), (m,),
           tuple(rng.standard_normal(s).astype(F32) for s in ((1, 1024), (1024, 512), (512,))),
           (rng.standard_normal((64, 256)).astype(F32), rng.standard_normal((256, 256)).astype(F32)),
           (rng.standard_normal((16, 64)).astype(F32), rng.standard_normal((600, 64, 64)).astype(F32))]
    return [(_graph(build), args) for build, args in zip((ew, rowsum, argmax, gemv, packed, stack), ins)]


@pytest.fixture
def team_settings():
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    yield
    set_num_threads(old)
    blocks.set_team_spin_us(old_spin)


def _call_raising(exe, args):
    """The result (None if it raised) and the FloatingPointError's message under np.errstate(all="raise"),
    which is per thread (warnings.catch_warnings is not: two threads' records mix)."""
    try:
        with np.errstate(all="raise"):
            return np.asarray(exe(*args)[0]).copy(), ""
    except FloatingPointError as e:
        return None, str(e)


def _call(exe, args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all="warn"):
            out = np.asarray(exe(*args)[0]).copy()
    return out, sorted({str(w.message) for w in caught})


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("spin_us", [0, 1, 50, 100_000])
def test_short_jobs_with_thread_counts_changing_between_them_keep_one_threads_bits(
        team_settings, tmp_path_factory, monkeypatch, mode, spin_us):
    """Team jobs of six kinds in random order, each at a random thread count 1..7 (the team's size
    differs from job to job, idle workers beyond it still entering the slots): every result equals
    the one-thread result bit for bit, and the pass whose last chunk overflows warns every time (a
    worker's flag reaches the caller), on the interpreter and on generated kernels."""
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))
    old = compiler.set_mode(mode)
    try:
        progs = _programs(np.random.default_rng(0))
        set_num_threads(1)
        want = [_call(exe, args) for exe, args in progs]
    finally:
        compiler.set_mode(old)
    assert want[0][1] == ["overflow encountered in exp"]
    blocks.set_team_spin_us(spin_us)
    rng = np.random.default_rng(spin_us)
    before = blocks.team_counts()
    bad = []
    for i in range(120):
        k = int(rng.integers(len(progs)))
        set_num_threads(int(rng.integers(1, 8)))
        got = _call(*progs[k])
        if got[0].tobytes() != want[k][0].tobytes() or got[1] != want[k][1]:
            bad.append((i, k, get_num_threads(), got[1]))
    after = blocks.team_counts()
    assert not bad, bad[:5]
    assert after["jobs"] - before["jobs"] > 0
    assert sum(after[k] - before[k] for k in ("solo_backoff", "solo_lagging", "solo_held")) \
        == after["solo_runs"] - before["solo_runs"]


def test_two_python_threads_alternating_job_kinds_keep_one_threads_bits(team_settings):
    """Two Python threads, each calling every kind in turn under np.errstate(all="raise") (one holds
    the team, the other runs alone, and which one changes from job to job): one thread's bits, and
    the overflowing pass raises in the thread that called it, every call."""
    progs = _programs(np.random.default_rng(1))
    quiet = progs[0][1][0].copy()
    quiet[-5:] = 0
    progs.append((progs[0][0], (quiet, progs[0][1][1])))   # the pass without its overflow: bits compared
    set_num_threads(1)
    want = [_call_raising(exe, args) for exe, args in progs]
    assert "overflow" in want[0][1] and want[-1][0] is not None
    set_num_threads(2)
    blocks.set_team_spin_us(50)
    bad: list[tuple[int, int]] = []

    def calls(t):
        for i in range(40):
            k = (i + t) % len(progs)
            got = _call_raising(*progs[k])
            if got[1] != want[k][1] or (got[0] is not None and got[0].tobytes() != want[k][0].tobytes()):
                bad.append((t, i, k, got[1]))

    run_threads(calls, range(2))
    assert not bad, bad[:5]

