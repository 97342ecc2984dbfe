"""``python -m tracetape``: the same command line as the ``tracetape`` script."""

from tracetape.cli import main

main()
