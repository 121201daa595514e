"""Job sources: Gavel's generator, throughput tables, workload specs from the CLI."""
