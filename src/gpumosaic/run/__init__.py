"""A run: its validated description (``description.RunDescription``), the one build
module (``build.build_parts``, ``build.run``) and the mechanism plug-ins
(``mechanisms``: ``event``, ``rounds``, ``gandiva``)."""
