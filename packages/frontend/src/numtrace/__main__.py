"""``python -m numtrace``: the ``numtrace`` command (see ``numtrace.cli``)."""

import sys

from .cli import main

sys.exit(main())
