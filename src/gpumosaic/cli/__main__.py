"""``python -m gpumosaic.cli COMMAND`` is ``gpumosaic COMMAND``."""

from gpumosaic.cli import main

main()
