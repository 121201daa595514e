"""``python -m gpumosaic.cli``: the same as the ``gpumosaic`` command."""

from gpumosaic.cli import main

main()
