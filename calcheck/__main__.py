"""``python -m calcheck``."""

from calcheck.cli import main

main()
