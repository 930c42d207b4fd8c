"""Every check of the monorepo is a nox session; CI (`ci/`) runs these and nothing else.

Compiled packages are installed non-editable, as users get them, so a test run
also proves that each package builds from its own directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

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


def _install(session: nox.Session, names: list[str]) -> None:
    """Install local packages (non-editable) and the test tools."""
    session.install(*TEST_DEPS)
    session.install(*[str(PACKAGES / n) for n in names])


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
    """All packages installed together; every package's tests."""
    _install(session, ALL)
    for name in ALL:
        _pytest(session, name)


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
    session.install(*TEST_DEPS)
    session.install(str(PACKAGES / "ir"), str(PACKAGES / "frontend"))
    session.install("--no-cache-dir", "--force-reinstall", "--no-deps", str(PACKAGES / "cpu"),
                    env={"NUMTRACE_CPU_BOUNDSCHECK": "1"})
    session.run("python", "-c", "import numtrace_cpu")
    _pytest(session, "cpu")
    session.run(*PYTEST, str(PACKAGES / "frontend" / "tests" / "test_reliability.py"),
                str(PACKAGES / "frontend" / "tests" / "test_fuzz_programs.py"),
                "-q", "-p", "no:cacheprovider",
                *session.posargs)


# Pinned: a new mypy release may report new errors, and the lint session must fail only for our code.
MYPY = "mypy==2.4.1"
NUMPY_STUBS = "numpy==2.4.6"  # its bundled stubs are what mypy checks our NumPy calls against


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over all Python sources (config: ruff.toml), then mypy over the four packages' sources
    (config: mypy.ini; the Cython modules are untyped to it). NumPy is installed for its type stubs."""
    session.install("ruff>=0.5", MYPY, NUMPY_STUBS)
    session.run("ruff", "check", ".")
    session.run("mypy")


# The site's build tools, pinned so a warning that fails the strict build is one we can reproduce.
DOCS_DEPS = ["mkdocs==1.6.1", "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11", "griffelib==2.4.1",
             "mkdocs-autorefs==1.4.5", "pymdown-extensions==13.1.2", "Markdown==3.11.3"]


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site (mkdocs.yml -> site/, warnings are errors, API pages from the installed packages'
    docstrings), then check every page: links resolve and every Python example (docstrings' too) runs."""
    _install(session, ["ir", "frontend", "cpu"])
    session.install(*DOCS_DEPS)
    session.run("python", "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"))
    pages = [str(ROOT / page) for page in ("README.md", "CONTRIBUTING.md", "docs")]
    session.run("python", str(ROOT / "ci" / "check_docs.py"), *pages)


@nox.session
def demo(session: nox.Session) -> None:
    """The README's main job: trace a small model, check it, run it on the CPU backend."""
    session.install(*[str(PACKAGES / n) for n in ["ir", "frontend", "cpu"]])
    session.run("python", str(ROOT / "examples" / "demo.py"))


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
]
INTEGRATION_NO_DEPS = ["filterpy==1.4.5"]


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
        session.run("python", str(script), *session.posargs, env=env)
