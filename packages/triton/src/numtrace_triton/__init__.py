"""numtrace's Triton GPU backend."""
