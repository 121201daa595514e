"""``gpumosaic compare``: the command (``command``), its modes (``fill``, ``policies``,
``placements``), the study on Ray (``ray``) and the table they print (``table``)."""
