"""numtrace: trace NumPy functions and modules into graphs and run them fast."""
