"""Run kinds: what one run of a study is (``registry.KINDS`` names them)."""
