#!/usr/bin/env bash
# What CI runs: the README's test command, each package alone with only its declared dependencies,
# the real-library integration suite, lint, docs, the demo, the examples, the Dask scale-out tests
# and a quick benchmark smoke run. Any failure fails the run (pytest's "no tests collected", exit 5,
# included). Each step prints its wall time, and the run ends with a table of them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned like the tools the sessions install (noxfile.py): a new nox release cannot change a run.
python3 -m pip install -q "nox==2026.10.20"
export PIP_DISABLE_PIP_VERSION_CHECK=1

TIMES=()
report() {
    local rc=$?
    echo
    echo "CI: $([ $rc -eq 0 ] && echo "all steps passed" || echo "FAILED (exit $rc)") in $SECONDS s; step times:"
    printf '%s\n' "${TIMES[@]}"
}
trap report EXIT
step() {
    local name=$1
    shift
    echo
    echo "=== $name ==="
    local start=$SECONDS
    "$@"
    TIMES+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
    echo "=== $name: $((SECONDS - start)) s ==="
}

step "tests (README test command)" python3 -m nox -s tests
for package in ir frontend cpu triton; do
    step "tests_$package (packages/$package alone)" python3 -m nox -s "tests_$package"
done
step "integration (real libraries' functions traced)" python3 -m nox -s integration
step "lint" python3 -m nox -s lint
step "docs" python3 -m nox -s docs
step "demo (README main job)" python3 -m nox -s demo
step "examples, quick run" python3 -m nox -s examples
step "dask (local cluster of worker processes)" python3 -m nox -s dask
step "benchmarks, quick smoke run" python3 -m nox -s bench -- --quick
