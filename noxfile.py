"""Every check of the monorepo is a nox session; CI (`ci/`) runs these and nothing else.

Local packages are installed non-editable, as users get them, so a test run
also proves that each package builds from its own directory. Each package's
wheel is built once into .nox/.wheels/<name>-<hash of its sources> and reused
by every session while those sources are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import nox
import nox.command

ROOT = Path(__file__).resolve().parent
PACKAGES = ROOT / "packages"
# scipy: its special functions are the foreign ufuncs the tracer records by name.
TEST_DEPS = ["pytest>=7", "hypothesis>=6", "scipy"]

# Each package with the local packages it declares as dependencies (exact pins
# to the same VERSION), in install order.
LOCAL_DEPS = {
    "ir": ["ir"],
    "frontend": ["ir", "frontend"],
    "cpu": ["ir", "cpu"],
    "triton": ["ir", "triton"],
}
ALL = ["ir", "frontend", "cpu", "triton"]

nox.options.sessions = ["lint", "tests", "docs"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True


WHEELS = ROOT / ".nox" / ".wheels"
# Not part of a package's build: tests, build output, Cython's generated C beside its .pyx.
NOT_SOURCE_DIRS = {"__pycache__", "build", "dist"}
NOT_SOURCE_SUFFIXES = {".so", ".pyd", ".pyc", ".pyo", ".o"}
# Environment that changes what a build produces.
BUILD_ENV = ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS")


def _source_hash(name: str, tag: str) -> str:
    """Hash of everything that goes into package ``name``'s wheel: its files (not tests or build
    output), the repo's VERSION, the interpreter tag and the build environment."""
    digest = hashlib.sha256(f"{tag}\n".encode())
    for var in sorted(v for v in os.environ if v in BUILD_ENV or v.startswith("NUMTRACE_")):
        digest.update(f"{var}={os.environ[var]}\n".encode())
    package = PACKAGES / name
    files = [ROOT / "VERSION"]
    for folder, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d not in NOT_SOURCE_DIRS and not d.startswith("tests")
                         and not d.endswith(".egg-info"))
        for file in map(Path(folder).joinpath, sorted(names)):
            generated = file.suffix in (".c", ".cpp", ".html") and file.with_suffix(".pyx").exists()
            if file.suffix not in NOT_SOURCE_SUFFIXES and not generated:
                files.append(file)
    for file in files:
        digest.update(f"{file.relative_to(ROOT)}\n".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _wheel(session: nox.Session, name: str, tag: str) -> Path:
    """Package ``name``'s wheel for this interpreter, built now only if its sources changed."""
    folder = WHEELS / f"{name}-{_source_hash(name, tag)}"
    wheels = sorted(folder.glob("*.whl"))
    if wheels:
        session.log(f"{name}: reusing {wheels[0].name} ({folder.name}: sources unchanged)")
        return wheels[0]
    session.log(f"{name}: building its wheel from packages/{name} ...")
    start = time.perf_counter()
    WHEELS.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=WHEELS))
    try:
        session.run("python", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(scratch),
                    str(PACKAGES / name))
        # Older builds of this package (same name length: not a concurrent build's scratch folder).
        for stale in WHEELS.glob(f"{name}-*"):
            if stale.is_dir() and stale != scratch and len(stale.name) == len(folder.name):
                shutil.rmtree(stale, ignore_errors=True)
        scratch.rename(folder)  # atomic: a half-built folder is never taken for a wheel
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    wheel = next(folder.glob("*.whl"))
    session.log(f"{name}: built {wheel.name} in {time.perf_counter() - start:.1f} s")
    return wheel


def _install_local(session: nox.Session, names: list[str], extras: dict[str, str] | None = None) -> None:
    """Install local packages non-editable from their cached wheels (``extras``: name -> extra)."""
    tag = session.run("python", "-c", "import sys, sysconfig; print(sys.implementation.cache_tag, "
                      "sysconfig.get_platform())", silent=True).strip()
    wheels = [f"{_wheel(session, name, tag)}{f'[{extras[name]}]' if name in (extras or {}) else ''}"
              for name in names]
    start = time.perf_counter()
    session.install(*wheels)
    session.log(f"installed {', '.join(names)} in {time.perf_counter() - start:.1f} s")


def _install(session: nox.Session, names: list[str]) -> None:
    """Install local packages (non-editable) and the test tools."""
    session.install(*TEST_DEPS)
    _install_local(session, names)


# Every pytest run: faulthandler on from interpreter start (a segfault prints every thread's Python
# traceback) and a traceback dump of every thread if one test runs past FAULT_TIMEOUT_S (a hang).
FAULT_TIMEOUT_S = "900"
PYTEST = ("python", "-X", "faulthandler", "-m", "pytest", "-p", "faulthandler",
          "-o", f"faulthandler_timeout={FAULT_TIMEOUT_S}")


def _pytest(session: nox.Session, name: str, *extra: str, env: dict | None = None) -> None:
    env = {**({"TRITON_INTERPRET": "1"} if name == "triton" else {}), **(env or {})}
    session.run(*PYTEST, str(PACKAGES / name / "tests"), "-q",
                "-p", "no:cacheprovider", *extra, *session.posargs, env=env)


@nox.session
def tests(session: nox.Session) -> None:
    """All packages installed together; every package's tests, each run even when another's fail: the
    session then fails naming them (pytest's exit 5, no tests collected, is a failure too)."""
    _install(session, ALL)
    failed = []
    for name in ALL:
        try:
            _pytest(session, name)
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"tests failed in: {', '.join(f'packages/{name}' for name in failed)}")


def _alone(package: str):
    def session_fn(session: nox.Session) -> None:
        _install(session, LOCAL_DEPS[package])
        _pytest(session, package)

    session_fn.__doc__ = f"packages/{package} alone with its declared dependencies: proves it stands alone."
    return nox.session(name=f"tests_{package}")(session_fn)


for _package in ALL:
    _alone(_package)


@nox.session
def triton(session: nox.Session) -> None:
    """The Triton backend's tests in interpreter mode (no GPU needed)."""
    _install(session, ["ir", "frontend", "triton"])
    _pytest(session, "triton")


STRESS_BATCHES = 8   # programs fuzz: 8 child processes x 2500 programs x 2 backends
STRESS_PROGRAMS = "2500"
STRESS_FILE_EXAMPLES = "2500"   # x 6 hypothesis file tests x 8 batches = 120k files (plus the load fuzz)


@nox.session
def stress(session: nox.Session) -> None:
    """The long runs. Each batch is its own child process (a nox ``session.run``): a crash is a signal
    exit code that fails the session, and faulthandler prints where. Prints the RSS figures."""
    _install(session, ["ir", "frontend", "cpu"])
    session.install("psutil")
    front = PACKAGES / "frontend" / "tests"
    session.run(*PYTEST, str(front / "test_property_shapes.py"), "-q", "-p", "no:cacheprovider",
                *session.posargs, env={"NUMTRACE_PROPERTY_EXAMPLES": "20000"})
    for batch in range(STRESS_BATCHES):
        session.run(*PYTEST, str(front / "test_fuzz_programs.py"), "-q", "-p", "no:cacheprovider",
                    *session.posargs, env={"NUMTRACE_FUZZ_EXAMPLES": STRESS_PROGRAMS,
                                           "NUMTRACE_FUZZ_SEED": str(batch + 1)})
    for batch in range(STRESS_BATCHES):
        session.run(*PYTEST, str(PACKAGES / "ir" / "tests" / "test_fuzz_files.py"), "-q",
                    "-p", "no:cacheprovider", *session.posargs,
                    env={"NUMTRACE_FUZZ_FILE_EXAMPLES": STRESS_FILE_EXAMPLES,
                         "NUMTRACE_FUZZ_FILE_SEED": str(batch + 1)})
    # Threads (8 x 10k calls), re-tracing races, 1M calls and 10k trace cycles for RSS growth: -s prints
    # the RSS figures.
    session.run(*PYTEST, str(front / "test_reliability.py"), "-q", "-s", "-p", "no:cacheprovider",
                *session.posargs, env={"NUMTRACE_STRESS": "1", "NUMTRACE_FUZZ_FILE_EXAMPLES": "5000"})


@nox.session
def boundscheck(session: nox.Session) -> None:
    """packages/cpu built with Cython boundscheck/wraparound/initializedcheck on, then its tests and the
    frontend's reliability tests on it: an out-of-bounds kernel access is an IndexError, not a crash."""
    _install(session, ["ir", "frontend"])
    session.install("--no-cache-dir", "--force-reinstall", "--no-deps", str(PACKAGES / "cpu"),
                    env={"NUMTRACE_CPU_BOUNDSCHECK": "1"})
    session.run("python", "-c", "import numtrace_cpu")
    _pytest(session, "cpu")
    session.run(*PYTEST, str(PACKAGES / "frontend" / "tests" / "test_reliability.py"),
                str(PACKAGES / "frontend" / "tests" / "test_fuzz_programs.py"),
                "-q", "-p", "no:cacheprovider",
                *session.posargs)


# Pinned: a new ruff or mypy release may report new errors, and the lint session must fail only for our
# code. (ci/run_all.sh pins nox itself the same way.)
RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"
NUMPY_STUBS = "numpy==2.4.6"  # its bundled stubs are what mypy checks our NumPy calls against


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over all Python sources (config: ruff.toml), then mypy over the four packages' sources
    (config: mypy.ini; the Cython modules are described by the .pyi stubs beside them). NumPy is
    installed for its type stubs."""
    session.install(RUFF, MYPY, NUMPY_STUBS)
    session.run("ruff", "check", ".")
    session.run("mypy")


# The site's build tools, pinned so a warning that fails the strict build is one we can reproduce. Ruff
# (the lint session's pin) is what mkdocstrings formats the API pages' signatures with (one parameter
# per line, not one long line).
DOCS_DEPS = ["mkdocs==1.6.1", "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11", "griffelib==2.4.1",
             "mkdocs-autorefs==1.4.5", "pymdown-extensions==13.1.2", "Markdown==3.11.3", RUFF]


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site (mkdocs.yml -> site/, warnings are errors, API pages from the installed packages'
    docstrings), then check every page: links resolve and every Python example (docstrings' too) runs."""
    _install(session, ["ir", "frontend", "cpu"])
    session.install(*DOCS_DEPS)
    session.run("python", "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"))
    pages = [str(ROOT / page) for page in ("README.md", "CONTRIBUTING.md", "docs")]
    session.run("python", str(ROOT / "ci" / "check_docs.py"), "--site", str(ROOT / "site"), *pages)


@nox.session
def demo(session: nox.Session) -> None:
    """The README's main job: trace a small model, check it, run it on the CPU backend."""
    _install_local(session, ["ir", "frontend", "cpu"])
    session.run("python", str(ROOT / "examples" / "demo.py"))


@nox.session
def examples(session: nox.Session) -> None:
    """Every example in examples/ but the demo (its own session): traced, checked, saved, loaded,
    compared, timed; with --quick unless other arguments are given."""
    _install_local(session, ["ir", "frontend", "cpu"])
    for script in sorted((ROOT / "examples").glob("[!_]*.py")):  # _*.py are shared helpers
        if script.name != "demo.py":
            session.run("python", str(script), *(session.posargs or ["--quick"]))


@nox.session
def dask(session: nox.Session) -> None:
    """numtrace.dask on a local cluster of worker processes, with the frontend's dask extra installed."""
    session.install(*TEST_DEPS)
    _install_local(session, ["ir", "frontend", "cpu"], extras={"frontend": "dask"})
    session.run(*PYTEST, str(PACKAGES / "frontend" / "tests_dask"), "-q", "-p", "no:cacheprovider",
                *session.posargs)


# Libraries whose functions the integration suite traces (test-only dependencies), pinned to the
# versions the suite was written against. filterpy is installed without its plotting dependency
# (matplotlib), which none of the traced functions import; scipy is what filterpy and properscoring
# import.
INTEGRATION_DEPS = [
    "scipy==1.17.1",
    "numpy-financial==1.0.0",
    "pymap3d==3.2.0",
    "transforms3d==0.4.2",
    "AHRS==0.4.0",
    "haversine==2.9.0",
    "properscoring==0.1",
    "scikit-fuzzy==0.5.0",
    "pykalman==0.11.2",
    "pyquaternion==0.9.9",
    "colour-science==0.4.7",
    "trimesh==5.2.0",
]
INTEGRATION_NO_DEPS = ["filterpy==1.4.5", "pytransform3d==3.17.0"]  # pytransform3d's deps are for plotting


@nox.session
def integration(session: nox.Session) -> None:
    """Library functions traced at one batch size, called at others: reproduced / loud / silent each."""
    _install(session, ["ir", "frontend", "cpu"])
    session.install(*INTEGRATION_DEPS)
    session.install("--no-deps", *INTEGRATION_NO_DEPS)
    session.run(*PYTEST, str(PACKAGES / "frontend" / "tests_integration"), "-q",
                "-p", "no:cacheprovider", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Every benchmark in benchmarks/ (numtrace beside its baselines); pass --quick for a smoke run."""
    _install(session, ALL)
    session.install("numexpr", "threadpoolctl")
    env = {"TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
    for script in sorted((ROOT / "benchmarks").glob("[!_]*.py")):  # _*.py are shared helpers
        if script.name not in NOT_IN_BENCH:
            session.run("python", str(script), *session.posargs, env=env)
    # peers.py's driver (its own processes, interleaved rounds, the table of their medians) on its
    # tiniest row, with the tools installed here (a few seconds); its full run is `nox -s peers`.
    session.run("python", str(ROOT / "benchmarks" / "peers.py"), "--quick", "--only", "w", "--rows", "W4",
                "--tools", "numpy,numtrace", "--rounds", "2", env=env)


# peers.py has its own session (it installs the peers; `bench` runs only a smoke of it), and
# w3_steps.py runs in its venv (it times ONNX Runtime's nodes beside numtrace's steps); quiet_compares.py
# compares two builds of the compare loops that its user makes from two source trees (see its docstring).
NOT_IN_BENCH = {"peers.py", "w3_steps.py", "quiet_compares.py"}


# The tools a user would pick instead of numtrace, for `peers`. Each is optional: peers.py skips one that
# did not install. torch is the CPU-only build (about 190 MB; the default build pulls in GBs of CUDA
# libraries), from the wheel folder pip is configured with.
PEER_DEPS = ["numexpr", "numba", "onnx", "onnxruntime", "torch==2.13.0+cpu"]


@nox.session
def peers(session: nox.Session) -> None:
    """benchmarks/peers.py: numtrace beside NumPy, torch.compile, ONNX Runtime, numexpr, numba and a
    hand-written C loop, each in its own process; pass --quick for a run of a few minutes, and for rows
    that swing with the host --rounds 5 --rows NAME (medians of 5 interleaved rounds). Not in CI."""
    _install_local(session, ["ir", "frontend", "cpu"])
    for dep in PEER_DEPS:
        try:
            session.install(dep)
        except nox.command.CommandFailed:
            session.warn(f"peers: {dep} did not install; peers.py skips it")
    session.run("python", str(ROOT / "benchmarks" / "peers.py"), *session.posargs)
