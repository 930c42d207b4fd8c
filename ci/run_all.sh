#!/usr/bin/env bash
# What CI runs: the README's test command, then lint, docs, the demo, the
# examples, the Dask scale-out tests and a quick benchmark smoke run. Any failure fails the run (pytest's "no tests
# collected", exit 5, included).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q nox
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() { echo; echo "=== $* ==="; }

step "tests (README test command)"
python3 -m nox -s tests
step "lint"
python3 -m nox -s lint
step "docs"
python3 -m nox -s docs
step "demo (README main job)"
python3 -m nox -s demo
step "examples, quick run"
python3 -m nox -s examples
step "dask (local cluster of worker processes)"
python3 -m nox -s dask
step "benchmarks, quick smoke run"
python3 -m nox -s bench -- --quick
echo
echo "CI: all steps passed"
