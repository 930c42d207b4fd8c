"""Hunted: the fuzzer's program for the cpu GEMV team's column pieces reaches that path whatever the
machine's thread count. Seven row chunks are cut by columns only at 2 to 6 or 8 threads, so on a
1-core machine (and at 7 or 9+ threads, with the other team program) the reach check failed."""

from __future__ import annotations

import numtrace as nt
import pytest
import test_fuzz_programs as fuzz

pytestmark = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="needs the cpu backend")


@pytest.mark.parametrize("threads", [1, 7, 16])
def test_team_columns_program_reaches_its_path_at_any_thread_count(threads):
    import numtrace_cpu

    old = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    path = "GEMV team pieces cut by columns"
    before = fuzz.PATH_PROGRAMS[path]
    try:
        fuzz.test_traced_program_matches_numpy_or_raises_clearly.hypothesis.inner_test(
            steps=[("gemv_team_columns", 0, 0)], backend="cpu")
        assert numtrace_cpu.get_num_threads() == threads   # the program's count is put back
    finally:
        numtrace_cpu.set_num_threads(old)
    assert fuzz.PATH_PROGRAMS[path] == before + 1
