"""Readers that turn trace files into JobSpecs and ClusterSpecs."""
