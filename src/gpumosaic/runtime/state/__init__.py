"""The service state: the SQLite store (the one writer), its rows, the writer fence."""
