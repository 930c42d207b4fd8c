"""Prints the integration verdicts (reproduced / loud / silent per backend) at the end of the run."""

from __future__ import annotations

import collections

from _harness import BACKENDS, RESULTS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("numtrace integration verdicts")
    libraries = sorted({r.case.split(".", 1)[0] for r in RESULTS})
    functions = sorted({r.case for r in RESULTS})
    write(f"{len(functions)} functions from {len(libraries)} libraries: {', '.join(libraries)}")
    for backend in BACKENDS:
        counts = collections.Counter(r.verdict for r in RESULTS if r.backend == backend)
        write(f"{backend:9s}: reproduced {counts['reproduced']:3d} / loud {counts['loud']:3d} / "
              f"silent {counts['silent']:3d}")
    verbose = config.getoption("verbose") > 0
    for r in sorted(RESULTS, key=lambda r: (r.verdict, r.case, r.backend)):
        if r.verdict != "reproduced" or verbose:
            write(str(r))
