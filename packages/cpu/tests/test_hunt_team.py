"""Hunted failures of the GEMV/packed thread team (nt_team.h, gemv.pxi): its spin setting, thread
counts beyond its size, several Python threads sharing it, fork and interpreter exit. Checks that
need a fresh process (the team's first job, fork, exit) run in a subprocess with a timeout, so a
hang fails the test instead of stalling the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numtrace_cpu import compile_graph, get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

_PRELUDE = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    from numtrace_cpu import compile_graph, set_num_threads
    from numtrace_cpu.isa import blocks
    from numtrace_ir import Graph
    from numtrace_ir.types import TensorType

    def gemv(k, n, dtype=np.float32):
        g = Graph()
        x = g.add_input("x", TensorType(np.dtype(dtype), (1, k)))
        w = g.add_input("w", TensorType(np.dtype(dtype), (k, n)))
        g.set_outputs([g.create_node("np.matmul", [x, w]).output])
        rng = np.random.default_rng(k + n)
        return (compile_graph(g, [x.type, w.type]), rng.standard_normal((1, k)).astype(dtype),
                rng.standard_normal((k, n)).astype(dtype))
""")


def _child(body: str, timeout: float = 120) -> str:
    proc = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("us", [2_147_484, 3_000_000, 10_000_000])
def test_team_spin_setting_round_trips_up_to_its_limit(us):
    """The spin is kept in nanoseconds: a setting above 2.1 s (the documented limit is 10 s) must
    not wrap around in a 32-bit product (10 s read back as 1.41 s, 3 s as a negative spin that
    switched the team off)."""
    old = blocks.team_spin_us()
    try:
        blocks.set_team_spin_us(us)
        assert blocks.team_spin_us() == us
    finally:
        blocks.set_team_spin_us(old)


def test_more_threads_than_the_team_has_still_use_the_team():
    """With more threads than the team's 63 workers and the caller, a job big enough for all of
    them runs on the whole team, not on the calling thread alone (every large GEMV and packed
    product of a process on a machine with more than 64 CPUs did)."""
    out = _child("""
        exe, x, w = gemv(16384, 4)    # 256 row chunks: enough units for 65 threads
        set_num_threads(1)
        want = exe(x, w)[0]
        set_num_threads(65)
        blocks.set_team_spin_us(50)
        before = blocks.team_counts()
        got = exe(x, w)[0]
        after = blocks.team_counts()
        assert got.tobytes() == want.tobytes()
        print(after["jobs"] - before["jobs"], after["solo_runs"] - before["solo_runs"])
    """)
    assert out.split() == ["1", "0"]



def test_jobs_that_wake_sleeping_workers_never_back_off():
    """A GEMV that finds the team's workers asleep (its calls further apart than their spin) wakes
    them and finishes before they start: that is an idle team, not a starved one, and must not
    send the next GEMVs to the calling thread alone. Every such job used to count as a miss, so
    the first jobs after any pause backed the team off for 20 ms."""
    out = _child("""
        import time
        exe, x, w = gemv(512, 64)     # 32768 multiply-adds: the team's smallest job
        set_num_threads(2)
        blocks.set_team_spin_us(50)
        exe(x, w)
        before = blocks.team_counts()
        for _ in range(8):
            time.sleep(0.03)          # past the spin: the worker sleeps on its condition variable
            exe(x, w)
        after = blocks.team_counts()
        print(after["backoffs"] - before["backoffs"], after["jobs"] - before["jobs"])
    """)
    backoffs, jobs = map(int, out.split())
    assert backoffs == 0 and jobs >= 1

def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _mlp(batch, sizes, dtype, relu):
    """x @ W0 + b0, ReLU (in `relu` order), ... , @ Wl + bl, then an elementwise tail
    (`* 0.5 + 1`, an elementwise pass); weights are run-time inputs, so batch 1..7 runs
    the GEMV kernels and batch 8 and more the packed products."""
    dt = np.dtype(dtype)
    g = Graph()
    h = g.add_input("x", TensorType(dt, (batch, sizes[0]) if batch else (sizes[0],)))
    types = [h.type]
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        w = g.add_input(f"w{i}", TensorType(dt, (k, n)))
        b = g.add_input(f"b{i}", TensorType(dt, (n,)))
        types += [w.type, b.type]
        h = _op(g, "np.add", _op(g, "np.matmul", h, w), b)
        if i < len(sizes) - 2:
            zero = _op(g, "prim.Constant", value=0)
            h = _op(g, "np.maximum", h, zero) if relu == "h0" else _op(g, "np.maximum", zero, h)
    h = _op(g, "np.add", _op(g, "np.multiply", h, _op(g, "prim.Constant", value=0.5)),
            _op(g, "prim.Constant", value=1.0))
    g.set_outputs([h])
    return compile_graph(g, types), types


def _numpy_mlp(args):
    h = args[0]
    layers = (len(args) - 1) // 2
    for i in range(layers):
        h = h @ args[1 + 2 * i] + args[2 + 2 * i]
        if i < layers - 1:
            h = np.maximum(h, 0)
    return h * 0.5 + 1.0


def test_python_threads_sharing_the_team_get_one_threads_bits():
    """Six Python threads call eight traced MLPs at once (batch 0 to 9, float32/float64, odd
    sizes, both ReLU orders: GEMVs, packed products and elementwise passes interleaved on one
    team, one thread's call holding it while the others run alone); every result has the bits of
    a one-thread call, which matches NumPy to float rounding. A call that fails its shape check
    in between leaves the others unharmed."""
    rng = np.random.default_rng(5)
    cases = []
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    try:
        set_num_threads(1)
        for i, batch in enumerate((0, 1, 2, 3, 5, 7, 8, 9)):
            dtype = (np.float32, np.float64)[i % 2]
            sizes = [int(s) for s in rng.integers(65, 700, 3)] + [int(rng.integers(1, 70))]
            exe, types = _mlp(batch, sizes, dtype, ("h0", "0h")[i // 2 % 2])
            args = [rng.standard_normal(t.shape).astype(dtype) for t in types]
            want = exe(*args)[0]
            tol = 1e-4 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(want, _numpy_mlp(args), rtol=tol, atol=tol * np.abs(want).max())
            cases.append((exe, args, want))
        set_num_threads(3)
        blocks.set_team_spin_us(200)
        bad = []

        def worker(seed):
            r = np.random.default_rng(seed)
            for _ in range(25):
                exe, args, want = cases[int(r.integers(len(cases)))]
                if r.integers(8) == 0:
                    with pytest.raises(ValueError, match="compiled for"):
                        exe(args[0][..., :-1], *args[1:])
                got = exe(*args)[0]
                if got.tobytes() != want.tobytes():
                    bad.append(got.shape)

        run_threads(worker, range(6))
    finally:
        set_num_threads(old)
        blocks.set_team_spin_us(old_spin)
    assert not bad


def test_fork_during_a_spin_window_and_exit_while_workers_spin():
    """fork() while the team's workers spin (and another Python thread runs GEMVs on it): the
    child's calls give the parent's bits on its calling thread; a process whose workers spin for
    the documented maximum (10 s) and that has a GEMV in flight on a daemon thread exits at once."""
    out = _child("""
        import time
        exe, x, w = gemv(784, 512)
        set_num_threads(2)
        blocks.set_team_spin_us(10_000_000)
        want = exe(x, w)[0]
        stop = threading.Event()
        def hammer():
            while not stop.is_set():
                exe(x, w)
        t = threading.Thread(target=hammer)
        t.start()
        for _ in range(5):
            exe(x, w)
            pid = os.fork()
            if pid == 0:
                ok = all(exe(x, w)[0].tobytes() == want.tobytes() for _ in range(3))
                os._exit(0 if ok else 3)
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        stop.set()
        t.join()
        threading.Thread(target=hammer, daemon=True).start()
        print("done", flush=True)
    """, timeout=60)
    assert out.split() == ["done"]


@pytest.mark.parametrize("us", [1.5, True, 2**40, "5", None, -1])
def test_team_spin_setting_refuses_what_is_not_an_int_in_range(us):
    """Like set_num_threads: a float is not truncated (1.5 ran as 1 us), a bool is not a count, and
    a huge int gets the range message rather than a C overflow."""
    old = blocks.team_spin_us()
    try:
        with pytest.raises(ValueError, match="0 to 10000000"):
            blocks.set_team_spin_us(us)
        assert blocks.team_spin_us() == old
    finally:
        blocks.set_team_spin_us(old)
