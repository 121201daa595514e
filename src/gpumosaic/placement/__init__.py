"""Where jobs go: filter -> score -> pick GPUs, one vectorized pass over nodes."""
