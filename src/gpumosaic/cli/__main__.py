"""``python -m gpumosaic.cli`` runs the command line (the same as ``gpumosaic``)."""

from gpumosaic.cli import main

main()
