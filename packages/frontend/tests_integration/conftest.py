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
    write(f"{'':18s}" + "".join(f"  {b:>9s}: reproduced  loud  silent" for b in BACKENDS))
    for library in [*libraries, None]:
        row = f"{library or 'all':18s}"
        for backend in BACKENDS:
            counts = collections.Counter(r.verdict for r in RESULTS if r.backend == backend
                                         and (library is None or r.case.split(".", 1)[0] == library))
            row += f"  {'':9s}  {counts['reproduced']:10d}  {counts['loud']:4d}  {counts['silent']:6d}"
        write(row)
    reproduced = sum(r.verdict == "reproduced" for r in RESULTS)
    write(f"reproduced {reproduced} of {len(RESULTS)} calls ({100.0 * reproduced / len(RESULTS):.0f}%)")
    verbose = config.getoption("verbose") > 0
    for r in sorted(RESULTS, key=lambda r: (r.verdict, r.case, r.backend)):
        if r.verdict != "reproduced" or verbose:
            write(str(r))
