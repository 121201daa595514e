"""A state is a file, not a string (issue 35, class 1): the one-writer lock of
``serve --state`` is held on the file itself, so a second service that reaches the same
file by a symlink, a hard link or a relative path is refused in one line naming the
holder's pid, as one by the same name is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpumosaic.errors import InputError
from gpumosaic.run.serve import ServeDescription, open_state


def other_names(state: Path, tmp_path: Path) -> dict[str, str]:
    link = tmp_path / "elsewhere" / "link.db"
    link.parent.mkdir()
    link.symlink_to(state)
    hard = tmp_path / "elsewhere" / "hard.db"
    os.link(state, hard)
    linked_dir = tmp_path / "dirlink"
    linked_dir.symlink_to(state.parent)
    return {
        "symlink": str(link),
        "hard link": str(hard),
        "symlinked directory": str(linked_dir / state.name),
        "relative path": os.path.relpath(state),
        "dotted path": str(state.parent / ".." / state.parent.name / state.name),
    }


def test_every_path_to_a_held_state_file_is_refused_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "s" / "state.db"
    lock, store = open_state(ServeDescription(state=str(state)))
    monkeypatch.chdir(tmp_path / "s")
    try:
        for how, path in other_names(state, tmp_path).items():
            with pytest.raises(InputError) as caught:
                open_state(ServeDescription(state=path))
            line = str(caught.value)
            assert f"pid {os.getpid()}" in line, (how, line)
            assert "--state" in line and "\n" not in line, (how, line)
    finally:
        store.close()
        lock.release()
    # Free again once released, by any of its names.
    lock, store = open_state(ServeDescription(state=str(tmp_path / "elsewhere" / "hard.db")))
    store.close()
    lock.release()


def test_the_holder_comes_from_the_kernel_when_no_note_names_it(tmp_path: Path) -> None:
    from gpumosaic.runtime.state.fencing import FileInUse, hold_file

    path = tmp_path / "f.db"
    held = hold_file(path, "test holder")
    held.note.unlink()  # a lost note: the kernel still knows the pid
    try:
        with pytest.raises(FileInUse, match=f"pid {os.getpid()}"):
            hold_file(tmp_path / "." / "f.db", "second")
    finally:
        held.release()
