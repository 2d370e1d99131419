"""``python -m sdclab`` runs the command line."""

from sdclab.cli import main

main()
