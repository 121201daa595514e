"""A database is a file, not a string (issue 35, class 1): the extender's one-writer
lock is held on the ``--db`` file itself, so a second extender that reaches the same
file by a symlink, a hard link or a relative path is refused naming the holder's pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from extender_builders import cluster

from gpumosaic.apps.extender.sqlite_store import SqliteBackend
from gpumosaic.errors import InputError


def test_every_path_to_a_held_database_is_refused_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = cluster(("V100", 1))
    db = tmp_path / "d" / "s.db"
    db.parent.mkdir()
    first = SqliteBackend(spec, db, "c")
    (tmp_path / "link.db").symlink_to(db)
    os.link(db, tmp_path / "hard.db")
    monkeypatch.chdir(db.parent)
    try:
        for path in (tmp_path / "link.db", tmp_path / "hard.db", Path("s.db")):
            with pytest.raises(InputError, match=f"in use by .*pid {os.getpid()}"):
                SqliteBackend(spec, path, "c")
    finally:
        first.close()
    SqliteBackend(spec, tmp_path / "hard.db", "c").close()  # free again once closed
