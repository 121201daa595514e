"""A share daemon's event log is bounded: past ``event_log_max_bytes`` it moves to
``NAME.1`` (the one before is dropped) and a new file starts after a whole line; the
service's node agent reads a moved log to its end before the new one, so no grant or
hand-over goes uncounted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import cast

from gpumosaic.live.share import limits
from gpumosaic.live.share.daemon import ShareDaemon
from gpumosaic.live.share.node import DaemonSettings, NodeShareAgent, _Daemon
from gpumosaic.sharing.lock import AntiThrashing


def test_a_full_log_moves_aside_after_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    daemon = ShareDaemon(tmp_path / "sock", event_log=log, event_log_max_bytes=400)
    daemon._log = log.open("a", buffering=1)  # what start() opens
    try:
        for i in range(10):
            daemon._event(0, f"EVENT_{i}", None, float(i))
    finally:
        daemon._log.close()
    rotated = limits.rotated_log(log)
    assert rotated.exists()
    kept = rotated.read_text().splitlines() + log.read_text().splitlines()
    events = [json.loads(line)["event"] for line in kept]  # every line whole
    assert events == [f"EVENT_{i}" for i in range(10 - len(events), 10)]  # newest, in order
    assert log.stat().st_size < 400 and rotated.stat().st_size < 400 + 200


def grant(name: str, handover: bool) -> str:
    return json.dumps({"event": "LOCK_OK", "name": name, "handover": handover}) + "\n"


def test_the_agent_counts_across_a_move(tmp_path: Path) -> None:
    agent = NodeShareAgent(str(tmp_path), [0], DaemonSettings(30.0, AntiThrashing.ON))
    d = _Daemon(0, cast(subprocess.Popen[bytes], None), 0.0)
    log = agent.event_log(0)
    log.write_text(grant("a", False) + grant("b", True))
    agent._read_events(d)
    with log.open("a") as f:  # written after the last read, then the file is moved
        f.write(grant("a", True))
    os.replace(log, limits.rotated_log(log))
    log.write_text(grant("b", True) + grant("a", False))
    agent._read_events(d)
    agent._read_events(d)  # nothing new: nothing counted twice
    assert agent._counts.grants == {"a": 3, "b": 2}
    assert agent._counts.handovers == {"a": 1, "b": 2}
