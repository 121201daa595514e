"""``gpumosaic sim-vs-live``: the command (``command``) and Gandiva's comparison (``gandiva``)."""
