"""The ``numtrace`` command: every subcommand, through ``main(argv)`` and as a subprocess; errors are
one line on stderr with a non-zero exit code."""

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import numtrace as nt
import pytest
from numtrace.cli import main

# The frontend's own test run has only the reference backend; with numtrace-cpu installed, the CPU one.
CPU = "cpu" in nt.available_backends()
BACKEND = "cpu" if CPU else "reference"


class MLP(nt.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nt.nn.Linear(20, 16)
        self.l2 = nt.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(np.maximum(self.l1(x), 0.0))


def f(x, y):
    return np.tanh(x @ y + 1.0).sum(axis=1), x * 2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    x = rng.random((8, 20), np.float32)
    nt.trace_module(MLP(), {"forward": (x,)}, backend=BACKEND).save(d / "mlp.nt")
    a, b = rng.random((8, 3), np.float32), rng.random((3, 5), np.float32)
    nt.trace(f, (a, b), backend=BACKEND).save(d / "f.nt")
    np.save(d / "x.npy", x)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    np.savez(d / "ab.npz", a, b)
    return d


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"numtrace {nt.__version__}")
    assert nt.__version__[0].isdigit()


def test_show(capsys, files):
    code, out, _ = run(capsys, "show", files / "mlp.nt")
    assert code == 0
    assert "saved module 'MLP'" in out and "# inputs: x : f32[8, 20]" in out
    assert "np.matmul x2" in out and "# guards: none" in out
    assert f"# parameters: 4 arrays, {(20 * 16 + 16 + 16 * 4 + 4) * 4 / 1024:.1f} KiB (stored" in out
    assert "graph(%x : f32[8, 20]" in out and "return (" in out


def test_code(capsys, files):
    code, out, _ = run(capsys, "code", files / "f.nt")
    assert code == 0 and out.startswith("def f(x, y):") and "np.tanh" in out


def test_run_prints_and_writes(capsys, files, tmp_path):
    a, b = np.load(files / "a.npy"), np.load(files / "b.npy")
    code, out, _ = run(capsys, "run", files / "f.nt", "--input", files / "a.npy", files / "b.npy")
    assert code == 0 and "output 0: float32[8]" in out and "output 1: float32[8, 3]" in out
    code, _, _ = run(capsys, "run", files / "f.nt", "-i", files / "ab.npz", "--backend", "reference",
                     "--out", tmp_path / "y.npz")
    assert code == 0
    with np.load(tmp_path / "y.npz") as y:
        np.testing.assert_allclose(y["arr_0"], f(a, b)[0], rtol=1e-5)
        np.testing.assert_allclose(y["arr_1"], f(a, b)[1], rtol=1e-6)
    x = np.load(files / "x.npy")
    code, _, _ = run(capsys, "run", files / "mlp.nt", "-i", files / "x.npy", "-o", tmp_path / "y.npy")
    assert code == 0 and np.load(tmp_path / "y.npy").shape == (8, 4)
    expected = nt.load(files / "mlp.nt")(x)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5)


def test_bench(capsys, files):
    code, out, err = run(capsys, "bench", files / "mlp.nt", "-i", files / "x.npy", "--repeat", "5",
                         "--backend", BACKEND)
    assert code == 0
    # progress on stderr, one finished line per backend; the table alone on stdout
    timed = [line.split(":")[0] for line in err.splitlines() if "calls in" in line]
    assert timed == (["timing reference", f"timing {BACKEND}"] if CPU else ["timing reference"])
    lines = out.splitlines()
    assert lines[0].split() == ["backend", "median", "vs", "reference", "max", "|diff|"]
    assert lines[1].startswith("reference") and "1.00x" in lines[1]
    assert len(lines) == (3 if CPU else 2) and lines[-1].startswith(BACKEND)


def test_bench_runs_the_reference_first_wherever_it_is_listed(capsys, files):
    # Every row is compared with the reference's outputs: they must exist before the first row.
    code, out, _ = run(capsys, "bench", files / "mlp.nt", "-i", files / "x.npy", "--repeat", "3",
                       "-b", BACKEND, "-b", "reference")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == (["reference", BACKEND] if CPU else ["reference"])


def test_explain(capsys, files):
    code, out, _ = run(capsys, "explain", files / "mlp.nt", "--input", files / "x.npy")
    assert code == 0 and f"{BACKEND} executable for (%x : f32[8, 20]" in out
    assert ("packed-weight kernel (module state, packed per call)" if CPU else "np.matmul") in out
    code, out, _ = run(capsys, "explain", files / "f.nt", "--backend", "reference")
    assert code == 0 and "reference executable" in out and "np.tanh" in out


def test_backends(capsys):
    code, out, _ = run(capsys, "backends")
    assert code == 0 and "reference: available" in out
    if CPU:
        import numtrace_cpu

        assert f"cpu: available (block interpreter built for {numtrace_cpu.ISA})" in out


def test_backends_lists_the_ones_not_installed_with_how_to_install_them(capsys, monkeypatch):
    from numtrace import backends

    monkeypatch.setattr(backends, "_entry_points", lambda: {})  # nothing but the built-in one installed
    monkeypatch.setattr(backends, "_instances", {})
    code, out, _ = run(capsys, "backends")
    assert code == 0
    assert out.splitlines() == ["reference: available",
                                "cpu: not installed (pip install numtrace-cpu)",
                                "triton: not installed (pip install numtrace-triton)"]
    with pytest.raises(ValueError, match=r"backend 'triton' cannot be used \(not installed: pip install "
                                         r"numtrace-triton\)"):
        backends.get_backend("triton")


def test_draw_dot_text(capsys, files, tmp_path):
    code, out, _ = run(capsys, "draw", files / "f.nt")
    assert code == 0 and out.startswith('digraph "f" {')
    code, _, _ = run(capsys, "draw", files / "f.nt", "-o", tmp_path / "g.dot")
    assert code == 0 and (tmp_path / "g.dot").read_text().startswith("digraph")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_draw_svg(capsys, files, tmp_path):
    code, out, _ = run(capsys, "draw", files / "mlp.nt", "-o", tmp_path / "g.svg")
    assert code == 0 and "wrote" in out
    root = ET.parse(tmp_path / "g.svg").getroot()
    nodes = [e for e in root.iter("{http://www.w3.org/2000/svg}g") if e.get("class") == "node"]
    graph = nt.load(files / "mlp.nt").graph
    assert len(nodes) == len(graph) + len(graph.inputs) + 1


def test_draw_svg_without_graphviz(capsys, files, tmp_path, monkeypatch):
    from numtrace_ir import dot

    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    code, _, err = run(capsys, "draw", files / "f.nt", "-o", tmp_path / "g.svg")
    assert code == 1 and "Graphviz" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["show", "{d}/missing.nt"], "cannot read"),
    (["show", "{d}/x.npy"], "not a valid saved trace"),
    (["run", "{d}/f.nt", "-i", "{d}/a.npy"], "takes 2 input array(s) (x, y), got 1"),
    (["run", "{d}/f.nt", "-i", "{d}/x.npy", "{d}/b.npy"], "do not fit"),
    (["run", "{d}/f.nt", "-i", "{d}/a.npy", "{d}/b.npy", "-o", "{d}/y.npy"], "give --out a .npz"),
    (["run", "{d}/f.nt", "-i", "{d}/a.npy", "{d}/missing.npy"], "cannot read input"),
    (["run", "{d}/f.nt", "-i", "{d}/a.npy", "{d}/b.npy", "-b", "nosuch"], "backend 'nosuch' cannot be used"),
    (["explain", "{d}/mlp.nt", "--method", "nope"], "the module has methods forward"),
])
def test_errors_are_one_line(capsys, files, argv, message):
    code, _, err = run(capsys, *[a.format(d=files) for a in argv])
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"numtrace {argv[0]}: error: ")
    assert message in err


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2


def test_console_script_and_module(files):
    env = dict(os.environ)
    env.pop("NUMTRACE_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "numtrace", "show", str(files / "f.nt")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "graph(%x : f32[8, 3], %y : f32[3, 5])" in done.stdout
    done = subprocess.run([sys.executable, "-m", "numtrace", "run", str(files / "missing.nt"), "-i", "x.npy"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("numtrace run: error: cannot read")
    script = shutil.which("numtrace", path=os.path.dirname(sys.executable))
    if script is not None:
        done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("numtrace ")
