"""Moved: ``gpumosaic.experiments.reproductions.gandiva``; kept so that
``python -m gpumosaic.experiments.gandiva_eval`` keeps working."""

from gpumosaic.experiments.reproductions.gandiva import main

if __name__ == "__main__":
    main()
