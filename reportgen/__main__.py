"""`python -m reportgen ...` = the `reportgen` command."""

from reportgen.cli import main

main()
