"""`python -m collector.cli`: the same as the `sextant` console script."""

from collector.cli import main

main()
