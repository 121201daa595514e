"""Moved: ``gpumosaic.experiments.reproductions.gavel_openb``; kept so that
``python -m gpumosaic.experiments.gavel_openb`` keeps working."""

from gpumosaic.experiments.reproductions.gavel_openb import main

if __name__ == "__main__":
    main()
