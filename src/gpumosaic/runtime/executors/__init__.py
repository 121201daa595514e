"""Executors: run a lease somewhere (in-process, Ray, warm Ray) behind one contract."""
