"""Where an openb spec points: ``openb:gpu`` / ``openb:all`` (the packaged node lists),
``openb:NAME`` (a packaged task list) or a file path. Plain Python: ``--cluster``,
``--workload openb:...`` and ``--background`` are checked with it before the reader
(``openb.py``, numpy) loads."""

from __future__ import annotations

from pathlib import Path

from gpumosaic.errors import InputError, unknown_name

# Packaged copy of the trace (see data/alibaba/SOURCE.md); never read from outside the package.
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "alibaba"
NODE_LISTS = {"gpu": "openb_node_list_gpu_node.csv", "all": "openb_node_list_all_node.csv"}


def packaged_task_lists() -> tuple[str, ...]:
    """Names accepted as ``openb:NAME`` for task lists."""
    names = (
        p.name[len("openb_pod_list_") : -len(".csv")] for p in DATA_DIR.glob("openb_pod_list_*.csv")
    )
    return tuple(sorted(names))


def resolve_openb(spec: str, *, kind: str) -> Path:
    """Map ``openb:NAME`` to the packaged file; ``openb:PATH.csv`` (a task list of the
    same columns, e.g. a subset) and anything else are paths that must exist."""
    if spec.startswith("openb:"):
        name = spec[len("openb:") :].strip()
        if kind == "nodes":
            if name not in NODE_LISTS:
                raise unknown_name("node list", spec, ("openb:gpu", "openb:all"), field=None)
            return DATA_DIR / NODE_LISTS[name]
        if name in packaged_task_lists():
            return DATA_DIR / f"openb_pod_list_{name}.csv"
        if Path(name).suffix.lower() != ".csv":
            known = [f"openb:{n}" for n in packaged_task_lists()]
            raise unknown_name("task list", spec, known, field=None)
        spec = name
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"no such {kind} file", path=path)
    return path
