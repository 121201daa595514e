"""A study's result store (Parquet), SQL over it (DuckDB) and per-job explanations."""
