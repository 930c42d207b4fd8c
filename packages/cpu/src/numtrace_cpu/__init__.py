"""numtrace's Cython CPU backend."""
