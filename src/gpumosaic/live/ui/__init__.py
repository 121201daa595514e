"""The live web views (``/ui``) of the three services: one self-contained page each (no
CDN: CSS and JavaScript ship in ``assets/`` and are inlined), fed by a Server-Sent Events
stream of changes (``stream.Feed``). ``rounds``: ``gpumosaic serve``; ``extender``: the
scheduler extender; ``share``: the share daemon's metrics port."""
