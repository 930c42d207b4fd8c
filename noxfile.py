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


def _pytest(session: nox.Session, name: str, *extra: str) -> None:
    env = {"TRITON_INTERPRET": "1"} if name == "triton" else {}
    session.run("python", "-m", "pytest", str(PACKAGES / name / "tests"), "-q",
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


@nox.session
def stress(session: nox.Session) -> None:
    """The long runs: the shape-idiom property test with 20k programs per backend."""
    _install(session, ["ir", "frontend", "cpu"])
    session.run("python", "-m", "pytest", str(PACKAGES / "frontend" / "tests" / "test_property_shapes.py"),
                "-q", "-p", "no:cacheprovider", *session.posargs,
                env={"NUMTRACE_PROPERTY_EXAMPLES": "20000"})


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over all Python sources (config: ruff.toml)."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Check the Markdown docs: links resolve and every Python example runs."""
    _install(session, ["ir", "frontend", "cpu"])
    session.run("python", str(ROOT / "ci" / "check_docs.py"), str(ROOT / "README.md"), str(ROOT / "docs"))


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
    session.run("python", "-m", "pytest", str(PACKAGES / "frontend" / "tests_integration"), "-q",
                "-p", "no:cacheprovider", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Every benchmark in benchmarks/ (numtrace beside its baselines); pass --quick for a smoke run."""
    _install(session, ALL)
    session.install("numexpr", "threadpoolctl")
    env = {"TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
    for script in sorted((ROOT / "benchmarks").glob("[!_]*.py")):  # _*.py are shared helpers
        session.run("python", str(script), *session.posargs, env=env)
