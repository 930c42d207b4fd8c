"""Op definitions, one module per family. Importing this package registers every op in
`numtrace_ir.registry`; add an op by adding one entry (usually one factory call) to its family."""

from numtrace_ir.ops import (
    contractions,  # noqa: F401
    correlation,  # noqa: F401
    counting,  # noqa: F401
    creation,  # noqa: F401
    decompositions,  # noqa: F401
    editing,  # noqa: F401
    elementwise,  # noqa: F401
    fft,  # noqa: F401
    foreign,  # noqa: F401
    host,  # noqa: F401
    indexing,  # noqa: F401
    joining,  # noqa: F401
    linalg,  # noqa: F401
    movement,  # noqa: F401
    nanfunctions,  # noqa: F401
    ordering,  # noqa: F401
    prim,  # noqa: F401
    random,  # noqa: F401
    reductions,  # noqa: F401
    scatter,  # noqa: F401
    searching,  # noqa: F401
    scipy_special,  # noqa: F401
    selection,  # noqa: F401
    signal,  # noqa: F401
    special,  # noqa: F401
    statistics,  # noqa: F401
    tiling,  # noqa: F401
    vector_products,  # noqa: F401
)
