"""A pass of thousands of chained ops never overflows a thread's stack (the backend promises never to
crash): a generated kernel keeps a tile per value spilled between table ops on its stack, so a pass
that needs more than codegen.STACK_BYTES of them stays on the interpreter, with the same bits."""

import os
import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import sys, threading
    import numpy as np
    from numtrace_cpu import compile_graph, compiler, set_num_threads
    from numtrace_ir import Graph, testing

    def chain(n, x):
        g = Graph()
        t = testing.type_of(x)
        v = g.add_input("x", t)
        for i in range(n):
            v = g.create_node("np.sin" if i % 2 else "np.negative", [v]).output
        g.set_outputs([v])
        return g, t

    x = np.linspace(-1.0, 1.0, 5000)
    for n in (int(a) for a in sys.argv[1:]):
        g, t = chain(n, x)
        runs = []
        for mode, threads in (("sync", 1), ("sync", 2), ("off", 1)):
            compiler.set_mode(mode)
            set_num_threads(threads)
            f = compile_graph(g, [t])
            got = [f(x)[0]]
            worker = threading.Thread(target=lambda: got.append(f(x)[0]))   # a caller's own thread
            worker.start()
            worker.join()
            runs.append((f.stats()["generated_kernels"], [a.tobytes() for a in got]))
        same = all(r[1] == [runs[-1][1][0]] * 2 for r in runs)
        print(n, runs[0][0], same)
""")


def test_thousands_of_chained_ops_run_without_overflowing_the_stack(tmp_path):
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CODEGEN="sync")
    done = subprocess.run([sys.executable, "-c", _CHILD, "40", "3000"], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    small, large = (line.split() for line in done.stdout.splitlines())
    assert small == ["40", "1", "True"]     # a short chain runs generated
    assert large == ["3000", "0", "True"]   # a long one on the interpreter: the same bits, no crash
