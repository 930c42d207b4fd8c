"""numtrace's intermediate representation: typed SSA graphs and the op registry."""
