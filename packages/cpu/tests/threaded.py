"""Concurrent calls for the tests that check one executable from several Python threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable


def run_threads(target: Callable, args: Iterable) -> None:
    """target(a) for every a in `args`, each in its own thread, all started before any is joined: the
    calls overlap, as a server's threads calling one trace do."""
    threads = [threading.Thread(target=target, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
