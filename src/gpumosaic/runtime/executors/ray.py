"""The Ray executor: each rank of a lease is one Ray actor that runs the job's command as
a subprocess.

What the actor holds (Ray's admission): ``num_gpus`` = the rank's share (fractional for a
milli-GPU job) and ``gpumosaic_model_<M>`` = the same amount of the chosen model, on the
node the placement layer chose: pinned by Ray node id (node affinity, not soft), since
several Ray nodes may share one address. A gang (several ranks) first reserves one
bundle per rank in a placement group (PACK; each bundle pinned to its node by the node-id
label, ``ray.io/node-id``) and starts its actors in their bundles. The GPU *index* the
placement layer chose is honoured by setting the job's ``CUDA_VISIBLE_DEVICES`` to the
node's device numbers (``cluster.LiveCluster.devices``), not to the ids Ray picked: Ray's
own fractional packing may differ from the placement's, which it never sees.

The actor is threaded (``wait`` blocks while ``terminate`` may be called) and holds no
CPU, so a 2-core machine runs many leases. The subprocess gets ``PR_SET_PDEATHSIG``
(Linux): if the actor dies (``ray.kill``, node loss, the service's Ray job ending), its
job dies with it, so a restarted service never finds an orphan still training. It runs
in its own session so that SIGTERM/SIGKILL reach the whole process group, and its exit
is the exit of that whole group (``wait``): a command under ``/bin/sh -c`` (dash does not
exec it) loses its shell to SIGTERM at once while the job itself checkpoints; reporting
the shell's exit would end the lease (fencing the job's last checkpoint) and start the
job's next lease while it still runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gpumosaic.runtime.cluster import model_resource
from gpumosaic.runtime.executors.contract import ExitReport, LaunchSpec, rank_env
from gpumosaic.runtime.executors.job_env import give_to, job_environment, run_as

LOG_TAIL_BYTES = 4000
NAMESPACE = "gpumosaic"  # lease actors are named in it, so a restarted service finds them
# Outside quotes, these make a command the shell's (operators, expansions, globs, a
# comment); ``=`` does only in a leading ``NAME=value`` (an assignment), not in
# ``--flag=value``.
_SHELL_CHARS = set(";&|<>()$`\\\"'*?[]#~%\n")
# Quoted text without expansions: literal, so it needs no shell ("..." with $ ` \ does).
_QUOTED = re.compile(r"'[^']*'|\"[^\"$`\\]*\"")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PR_SET_PDEATHSIG = 1
NODE_ID_LABEL = "ray.io/node-id"  # every Ray node's label: its node id


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def argv(command: str) -> list[str]:
    """A plain command runs directly (so PDEATHSIG and the stop's SIGTERM reach the job
    itself); one that needs a shell (pipes, ``&&``, variables, ``NAME=value cmd``) runs
    under ``/bin/sh -c``. Quoted arguments and ``--flag=value`` are plain: under a shell
    that does not exec its last command (dash), a stop's SIGTERM ends the shell at once
    while the job goes on, its lease is ended under it and its final checkpoint is
    refused (every emulated job with ``--rates M=R`` or a quoted job type ran so)."""
    outside = _QUOTED.sub("", command)
    words = outside.split()
    if any(c in _SHELL_CHARS for c in outside) or (words and _ASSIGNMENT.match(words[0])):
        return ["/bin/sh", "-c", command]
    return shlex.split(command)


def actor_name(lease_id: str, rank: int) -> str:
    return f"lease-{lease_id}-rank-{rank}"


def log_tail(path: str, size: int = LOG_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            f.seek(max(0, end - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


# Wall seconds the rest of a job's process group may outlive its first process once that
# one exited by itself (a job that leaves a background process behind); then the group
# is killed. A bound, not a calibration. (A stopped lease's group gets its grace period.)
GROUP_EXIT_GRACE_S = 10.0
GROUP_POLL_S = 0.02
GROUP_KILL_WAIT_S = 2.0  # after SIGKILL: then the lease is over whatever is still listed

CANNOT_START_CODE = 127  # what a shell answers for a command it cannot run
# Linux's MAX_ARG_STRLEN: no single argument (``sh -c``'s command) may be longer, so a
# longer command cannot start; refused before it is parsed (shlex is slow on megabytes).
MAX_COMMAND_BYTES = 131_072


def _start_failure(tail: str) -> str:
    """The reason ``LeaseProcess`` wrote when the command could not start ('' if none)."""
    for line in reversed(tail.splitlines()):
        if line.startswith("gpumosaic: cannot start: "):
            return line[len("gpumosaic: ") :]
    return ""


class LeaseProcess:
    """Body of the Ray actor (decorated in ``RayExecutor``): one rank's subprocess.

    A command that cannot start (no such binary or workdir, a NUL byte, an argument list
    over the system's limit, unbalanced quotes) does not raise: the reason goes to the
    job's log, and ``wait`` answers ``CANNOT_START_CODE`` at once, so the service counts
    a failed attempt instead of a lost lease."""

    def __init__(self, command: str, workdir: str, env: dict[str, str], log_path: str) -> None:
        self.log_path = log_path
        self.start_error = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self._kill_by: float | None = None  # told to stop: the group is killed then
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(
                f"--- lease {env.get('GPUMOSAIC_LEASE_ID', '')} rank "
                f"{env.get('GPUMOSAIC_RANK', '0')} ---\n".encode()
            )
            log.flush()
            try:
                size = len(command.encode("utf-8", "surrogateescape"))
                if size > MAX_COMMAND_BYTES:
                    raise ValueError(
                        f"the command is {size:,} bytes, over the {MAX_COMMAND_BYTES:,}-byte "
                        "limit of one argument"
                    )
                # A clean environment, never the worker's (the service's on a local Ray)
                job_env, user = job_environment(os.environ, env)
                if env.get("GPUMOSAIC_CHECKPOINT_DIR"):
                    os.makedirs(env["GPUMOSAIC_CHECKPOINT_DIR"], exist_ok=True)
                    give_to(env["GPUMOSAIC_CHECKPOINT_DIR"], user)
                self.proc = subprocess.Popen(
                    argv(command),
                    cwd=workdir or None,
                    env=job_env,
                    **run_as(user),  # --job-user
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            except (OSError, ValueError, KeyError, subprocess.SubprocessError) as err:
                self.start_error = f"cannot start: {_short(err)}"
                log.write(f"gpumosaic: {self.start_error}\n".encode())
        self.started_at = time.time()

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def wait(self) -> tuple[int, str]:
        if self.proc is None:
            return CANNOT_START_CODE, log_tail(self.log_path)
        code = self.proc.wait()
        self._wait_for_group()
        return code, log_tail(self.log_path)

    def _wait_for_group(self) -> None:
        """Until no process of the job's group is left (see module doc). The group is
        killed at a stopped lease's grace period's end, or ``GROUP_EXIT_GRACE_S`` after
        its first process exited by itself (said in the job's log)."""
        assert self.proc is not None
        pgid = self.proc.pid
        started = time.monotonic()
        killed: float | None = None
        while group_alive(pgid):
            now = time.monotonic()
            if killed is None:
                kill_by = self._kill_by  # terminate() may set it meanwhile
                if now >= (kill_by if kill_by is not None else started + GROUP_EXIT_GRACE_S):
                    if kill_by is None:
                        with open(self.log_path, "ab") as log:
                            log.write(b"gpumosaic: the job's other processes outlived it\n")
                    self._signal(signal.SIGKILL)
                    killed = now
            elif now - killed > GROUP_KILL_WAIT_S:
                return  # SIGKILLed and still listed: nothing more to wait for
            time.sleep(GROUP_POLL_S)

    def terminate(self, grace_s: float) -> None:
        if self.proc is None or not group_alive(self.proc.pid):
            return
        self._kill_by = time.monotonic() + grace_s
        self._signal(signal.SIGTERM)
        timer = threading.Timer(grace_s, self._kill_if_alive)
        timer.daemon = True
        timer.start()

    def _kill_if_alive(self) -> None:
        if self.proc is not None and group_alive(self.proc.pid):
            self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def failure(self) -> str:
        return self.start_error


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (a zombie is not: an orphan
    that exited may wait for a parent that never reaps it)."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel (zombies count there)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _short(err: BaseException, limit: int = 200) -> str:
    """An error's text, bounded (a 10 MB command must not come back in the reason)."""
    text = str(err)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(slots=True)
class _Running:
    spec: LaunchSpec
    actors: list[Any]
    waits: list[Any]
    started: list[Any]
    launched_at: float
    pg: Any = None
    results: dict[int, tuple[int | None, str, bool, str]] = field(default_factory=dict)
    ready: bool = False
    cancelled: bool = False  # stopped before its processes started: killed at once


class RayExecutor:
    """Leases as Ray actors on the cluster ``ray`` is connected to (see module doc)."""

    def __init__(self, start_timeout_s: float = 120.0) -> None:
        import ray

        self.ray = ray
        self.start_timeout_s = start_timeout_s
        remote: Any = ray.remote  # its stubs lack the actor options
        self._actor_cls = remote(num_cpus=0, max_restarts=0, max_concurrency=4)(LeaseProcess)
        self._running: dict[str, _Running] = {}
        self._port = 29500

    def launch(self, spec: LaunchSpec) -> None:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,
            PlacementGroupSchedulingStrategy,
        )

        pg = None
        if len(spec.ranks) > 1:
            bundles = [self._resources(spec, r, bundle=True) for r in spec.ranks]
            on_node = [{NODE_ID_LABEL: r.node_id} for r in spec.ranks]
            pg = placement_group(bundles, strategy="PACK", bundle_label_selector=on_node)
        self._port += 1
        actors, waits, started = [], [], []
        for i, rank in enumerate(spec.ranks):
            env = rank_env(spec, rank, self._port)
            if pg is not None:
                opts: dict[str, Any] = {
                    "scheduling_strategy": PlacementGroupSchedulingStrategy(
                        placement_group=pg, placement_group_bundle_index=i
                    ),
                    **self._resources(spec, rank, bundle=False, split=True),
                }
            else:
                opts = self._resources(spec, rank, bundle=False, split=True)
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                    rank.node_id, soft=False
                )
            opts.update(name=actor_name(spec.lease_id, rank.rank), namespace=NAMESPACE)
            actor = self._actor_cls.options(**opts).remote(
                spec.command, spec.workdir, env, spec.log_path
            )
            actors.append(actor)
            started.append(actor.pid.remote())
            waits.append(actor.wait.remote())
        self._running[spec.lease_id] = _Running(spec, actors, waits, started, time.time(), pg)

    @staticmethod
    def _resources(
        spec: LaunchSpec, rank: Any, *, bundle: bool, split: bool = False
    ) -> dict[str, Any]:
        share = rank.gpu_share
        custom = {f"node:{rank.ip}": 0.001}
        if share > 0:
            custom[model_resource(spec.gpu_model)] = share
        if bundle:
            return {"GPU": share, **custom} if share > 0 else custom
        return {"num_gpus": share, "resources": custom}

    def stop(self, lease_id: str, grace_s: float) -> None:
        run = self._running.get(lease_id)
        if run is None:
            return
        if not run.ready:
            done, _ = self.ray.wait(run.started, num_returns=len(run.started), timeout=0)
            run.ready = len(done) == len(run.started)
        if not run.ready:  # nothing to checkpoint yet: do not wait for it to start
            run.cancelled = True
            self._abort(run)
            return
        for actor in run.actors:
            actor.terminate.remote(grace_s)

    def reap(self, lease_id: str, ranks: int) -> None:
        """Kill the actors of a lease a previous run of the service left (after a crash,
        Ray may not yet have cleaned up the dead driver's actors, which hold GPUs)."""
        for rank in range(ranks):
            try:
                actor = self.ray.get_actor(actor_name(lease_id, rank), namespace=NAMESPACE)
            except ValueError:
                continue  # already gone
            with contextlib.suppress(Exception):
                self.ray.kill(actor)

    def kill(self, lease_id: str) -> None:
        """Kill the lease's actors at once (as a lost node would)."""
        run = self._running.get(lease_id)
        if run is not None:
            for actor in run.actors:
                self.ray.kill(actor)

    def actors(self, lease_id: str) -> list[Any]:
        run = self._running.get(lease_id)
        return [] if run is None else list(run.actors)

    def poll(self) -> list[ExitReport]:
        ray = self.ray
        out: list[ExitReport] = []
        now = time.time()
        for lease_id, run in list(self._running.items()):
            if run.cancelled:
                del self._running[lease_id]
                out.append(ExitReport(lease_id, None, False, "", "stopped before it started"))
                continue
            if not run.ready:
                done, _ = ray.wait(run.started, num_returns=len(run.started), timeout=0)
                if len(done) == len(run.started):
                    run.ready = True
                elif now - run.launched_at > self.start_timeout_s:
                    self._abort(run)
                    del self._running[lease_id]
                    out.append(
                        ExitReport(lease_id, None, True, "", "not started in time (Ray resources)")
                    )
                    continue
            pending = [w for i, w in enumerate(run.waits) if i not in run.results]
            if not pending:
                continue
            done, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
            for ref in done:
                i = run.waits.index(ref)
                try:
                    code, tail = ray.get(ref)
                    detail = _start_failure(tail) if code == CANNOT_START_CODE else ""
                    run.results[i] = (code, tail, False, detail)
                except Exception as err:  # the actor or its node died
                    tail = log_tail(run.spec.log_path)
                    run.results[i] = (None, tail, True, type(err).__name__)
            if any(lost for _, _, lost, _ in run.results.values()) and len(run.results) < len(
                run.waits
            ):
                self._abort(run)  # a gang does not go on with a rank missing
                for i in range(len(run.waits)):
                    run.results.setdefault(i, (None, "", True, "gang member lost"))
            if len(run.results) == len(run.waits):
                del self._running[lease_id]
                self._abort(run)  # the actors hold their GPUs until they are gone
                out.append(self._report(lease_id, run))
        return out

    @staticmethod
    def _report(lease_id: str, run: _Running) -> ExitReport:
        results = [run.results[i] for i in range(len(run.waits))]
        lost = any(r[2] for r in results)
        codes = [r[0] for r in results if r[0] is not None]
        code = next((c for c in codes if c != 0), 0 if codes else None)
        tail = results[0][1]
        detail = next((r[3] for r in results if r[3]), "")
        return ExitReport(lease_id, code, lost, tail, detail)

    def _abort(self, run: _Running) -> None:
        for actor in run.actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor)
        if run.pg is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(run.pg)

    def shutdown(self) -> None:
        for run in self._running.values():
            self._abort(run)
        self._running.clear()
