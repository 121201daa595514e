"""``gpumosaic reproduce``: the group and its FGD/PWR and nvshare commands (``group``), and
the Gavel, Gandiva and Gavel-on-openb reproductions."""
