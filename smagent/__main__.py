"""``python -m smagent``: the same command line as the ``smagent`` script."""
from smagent.cli import main

if __name__ == "__main__":
    main(prog_name="smagent")
