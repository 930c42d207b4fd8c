"""Command-line entry point."""


def main() -> int:
    return 0
