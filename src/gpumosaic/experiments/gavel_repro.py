"""Moved: ``gpumosaic.experiments.reproductions.gavel``; kept so that
``python -m gpumosaic.experiments.gavel_repro`` keeps working."""

from gpumosaic.experiments.reproductions.gavel import main

if __name__ == "__main__":
    main()
