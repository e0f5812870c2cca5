"""`python -m reportgen ...` = the `reportgen` command."""

from reportgen.cli import main

if __name__ == "__main__":      # importing the module runs nothing
    main()
