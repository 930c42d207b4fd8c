#!/usr/bin/env bash
# The Triton backend on a real CUDA GPU (not part of CI, which has no GPU): builds the packages for this
# machine's Python, runs packages/triton/tests with the interpreter off, then benchmarks/gpu.py.
#   bash ci/gpu_check.sh [pytest args...]     logs go to $OUT (or ./gpu-out)
# TEST_S / BENCH_S bound each step's seconds; WORKERS sets pytest-xdist's process count (0: none).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SITE=${SITE:-/tmp/numtrace-gpu-site}
t0=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

nvidia-smi -L || true
$PY -c "import sys, numpy, triton; print(sys.version.split()[0], 'numpy', numpy.__version__, 'triton', triton.__version__)"
# The packages need setuptools >= 77 to build; a wheel of it may travel in .whl/ (git-ignored).
build_path=${PYTHONPATH:-}
if ls .whl/setuptools-*.whl > /dev/null 2>&1; then
    $PY -m pip install -q --no-deps --no-index --target /tmp/numtrace-gpu-build .whl/setuptools-*.whl
    build_path=/tmp/numtrace-gpu-build${build_path:+:$build_path}
fi
if ! PYTHONPATH=$build_path $PY -m pip install -q --no-deps --no-build-isolation --no-index --target "$SITE" \
        packages/ir packages/frontend packages/triton > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "build failed"
    exit 1
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
elapsed "built numtrace-ir, numtrace, numtrace-triton"

workers=${WORKERS:-8}
xdist=()
if [ "$workers" != 0 ]; then xdist=(-n "$workers"); fi
NUMTRACE_TRITON_TESTS_ON_GPU=1 timeout "${TEST_S:-330}" $PY -X faulthandler -m pytest packages/triton/tests \
    -q -p no:cacheprovider -p no:benchmark "${xdist[@]}" -o faulthandler_timeout=300 -rfE "$@" > "$OUT/tests.log" 2>&1
test_rc=$?
tail -60 "$OUT/tests.log"
elapsed "tests rc=$test_rc"

if [ "${BENCH_S:-150}" = 0 ]; then echo "benchmark skipped" > "$OUT/bench.log"; else timeout "${BENCH_S:-150}" $PY benchmarks/gpu.py > "$OUT/bench.log" 2>&1; fi
bench_rc=$?
cat "$OUT/bench.log" | tail -60
elapsed "benchmarks/gpu.py rc=$bench_rc"
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]
