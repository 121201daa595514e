"""Reproductions of published results with our models: Gandiva, Gavel, Gavel on openb, nvshare."""
