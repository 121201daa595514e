"""The time-quantum lock of one GPU: who holds it, who waits, when a quantum ends. No clock.

One object decides for both drivers: the nvshare model (``sharing/nvshare.py``) feeds it
simulated times, the share daemon (``runtime/share/daemon.py``) wall-clock times. Each method
takes ``now`` (seconds) and returns the decisions to act on: ``Grant`` (LOCK_OK),
``Drop`` (DROP_LOCK), ``Revoke`` (LOCK_REVOKED) and ``Schedule`` (SCHED_ON / SCHED_OFF).
Rules (nvshare's scheduler, plus ``auto`` and revocation):

* anti-thrashing **on**: one holder at a time; requests queue first-come-first-served; the
  holder keeps the lock for ``tq_s``; when that expires and someone waits it is asked to
  drop (once), and the next in line is granted when it releases; a holder nobody waits
  for keeps the lock for another quantum. A holder may release early (idle) at any time;
* **off**: everybody runs (``Schedule(serialized=False)``), the queue is emptied;
* **auto**: serialize only while the registered working sets exceed the GPU's memory, and
  let everybody run while they fit. Every switch is broadcast and restarts the lock empty;
* a client that leaves (exits, dies, disconnects) leaves at once: if it held the lock, the
  next in line is granted immediately;
* **revocation** (``revoke_grace_s``, the daemon's guard against a holder that ignores the
  drop): a holder that has not released ``tq_s + revoke_grace_s`` after its drop loses the
  lock and the next in line is granted. ``None`` never revokes: the model's simulated
  clients always release once their in-flight iteration is done.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from gpumosaic.options import OFF_WORDS, ON_WORDS

DEFAULT_TQ_S = 30.0  # nvshare's default quantum
# The share daemon's revocation grace (``GpuLock.revoke_grace_s``) when ``grace`` is not
# given (``runtime/share/limits.py`` holds the same number for the daemon's bounds).
DEFAULT_REVOKE_GRACE_S = 0.5
# DROP_LOCK -> cuCtxSynchronize -> LOCK_RELEASED -> LOCK_OK: socket round trips plus the
# drain of in-flight kernels, a fraction of a second (the nvshare model's hand-over cost).
HANDOVER_SYNC_S = 0.1
LATENCY_WINDOW = 4096  # hand-over latencies kept for the p50/p99 gauges
# Short keys of ``--sharing nvshare:...``, the same for simulate and serve.
NVSHARE_ALIASES = {"at": "anti_thrashing"}


class AntiThrashing(StrEnum):
    ON = "on"
    OFF = "off"
    AUTO = "auto"

    @classmethod
    def parse(cls, word: str) -> AntiThrashing:
        """``auto``, or the project's on/off words (``on``/``true``/``yes``/``1``,
        ``off``/``false``/``no``/``0``, any case): the one spelling that ``simulate
        --sharing nvshare:anti_thrashing=...`` and ``serve --sharing nvshare:...`` both
        accept. What each mode does is ``GpuLock``'s rule (module doc), which the model
        and the daemon both run."""
        w = word.strip().lower()
        if w == cls.AUTO.value:
            return cls.AUTO
        if w in ON_WORDS:
            return cls.ON
        if w in OFF_WORDS:
            return cls.OFF
        raise ValueError(
            f"anti_thrashing: expected one of auto, on, off (or true/false, yes/no, 1/0), "
            f"got {word!r}"
        )


@dataclass(frozen=True, slots=True)
class Grant:
    """``client_id`` now holds the GPU; ``handover``: it follows a different holder."""

    client_id: int
    handover: bool


@dataclass(frozen=True, slots=True)
class Drop:
    """``client_id``'s quantum expired and someone waits: synchronize and release."""

    client_id: int


@dataclass(frozen=True, slots=True)
class Revoke:
    """``client_id`` did not release in time after its drop and no longer holds the GPU."""

    client_id: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """Tell ``client_id`` whether work is serialized (ask for the lock) or free-running."""

    client_id: int
    serialized: bool


Decision = Grant | Drop | Revoke | Schedule


def check_tq(tq_s: float) -> float:
    """A quantum the lock can run with: finite and > 0 (the daemon's inputs are also held
    to a documented range, ``runtime/share/limits.py``)."""
    if not (math.isfinite(tq_s) and tq_s > 0):
        raise ValueError(f"tq must be a finite number of seconds > 0, got {tq_s}")
    return float(tq_s)


@dataclass(slots=True)
class Client:
    id: int
    pid: int
    name: str
    registered_at: float
    bytes: int = 0
    held_s: float = 0.0
    grants: int = 0


@dataclass(frozen=True, slots=True)
class ClientStatus:
    id: int
    pid: int
    name: str
    working_set_bytes: int
    held_s: float
    grants: int

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "pid": self.pid,
            "name": self.name,
            "working_set_bytes": self.working_set_bytes,
            "held_s": round(self.held_s, 6),
            "grants": self.grants,
        }


@dataclass(frozen=True, slots=True)
class GpuStatus:
    gpu: int
    tq_s: float
    anti_thrashing: AntiThrashing
    serialized: bool
    holder: ClientStatus | None
    waiting: tuple[ClientStatus, ...]
    clients: tuple[ClientStatus, ...]
    handovers: int
    revocations: int
    revoke_grace_s: float | None
    memory_bytes: int | None
    working_set_bytes: int
    handover_latencies_s: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "tq_s": self.tq_s,
            "anti_thrashing": self.anti_thrashing.value,
            "serialized": self.serialized,
            "holder": None if self.holder is None else self.holder.as_dict(),
            "waiting": [c.as_dict() for c in self.waiting],
            "clients": [c.as_dict() for c in self.clients],
            "handovers": self.handovers,
            "revocations": self.revocations,
            "revoke_grace_s": self.revoke_grace_s,
            "memory_bytes": self.memory_bytes,
            "working_set_bytes": self.working_set_bytes,
        }


def _eps(now: float) -> float:
    """Tolerance for "the quantum is over": relative, so that a deadline reached by adding
    floating-point intervals counts as reached at any clock value."""
    return 1e-9 * max(1.0, abs(now))


class GpuLock:
    """The lock of one GPU (see module doc). Methods return the decisions to act on."""

    def __init__(
        self,
        gpu: int,
        tq_s: float = DEFAULT_TQ_S,
        anti_thrashing: AntiThrashing = AntiThrashing.AUTO,
        memory_bytes: int | None = None,
        revoke_grace_s: float | None = None,
    ) -> None:
        if revoke_grace_s is not None and not (
            math.isfinite(revoke_grace_s) and revoke_grace_s >= 0
        ):
            raise ValueError(f"revoke grace must be finite and >= 0, got {revoke_grace_s}")
        self.gpu = gpu
        self.tq_s = check_tq(tq_s)
        self.mode = AntiThrashing(anti_thrashing)
        self.revoke_grace_s = revoke_grace_s
        self.fixed_memory = memory_bytes
        self.reported_memory: int | None = None
        self.clients: dict[int, Client] = {}
        self.queue: deque[int] = deque()
        self.holder: int | None = None
        self.last_holder: int | None = None
        self.grant_at = 0.0
        self.drop_at: float | None = None
        self.handovers = 0
        self.revocations = 0
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.serialized = self._should_serialize()

    # --- memory and mode ------------------------------------------------------------------

    @property
    def memory_bytes(self) -> int | None:
        return self.fixed_memory if self.fixed_memory is not None else self.reported_memory

    @property
    def dropping(self) -> int | None:
        """The holder that was asked to drop and has not released yet, if any."""
        return self.holder if self.drop_at is not None else None

    def working_set_bytes(self) -> int:
        return sum(c.bytes for c in self.clients.values())

    def _should_serialize(self) -> bool:
        if self.mode is AntiThrashing.ON:
            return True
        if self.mode is AntiThrashing.OFF:
            return False
        memory = self.memory_bytes
        return memory is not None and self.working_set_bytes() > memory

    def _resettle(self, now: float) -> list[Decision]:
        """Switch between serialized and free-running if the rule says so; broadcast it."""
        serialize = self._should_serialize()
        if serialize == self.serialized:
            return []
        self.serialized = serialize
        if self.holder is not None:
            self._account(now)
        self.holder, self.drop_at = None, None
        self.queue.clear()
        return [Schedule(cid, serialize) for cid in self.clients]

    def set_mode(self, mode: AntiThrashing, now: float) -> list[Decision]:
        self.mode = AntiThrashing(mode)
        return self._resettle(now)

    def set_tq(self, tq_s: float, now: float) -> list[Decision]:
        self.tq_s = check_tq(tq_s)
        return self.tick(now)

    # --- clients ----------------------------------------------------------------------------

    def register(self, client_id: int, pid: int, name: str, now: float) -> list[Decision]:
        self.clients[client_id] = Client(client_id, pid, name, now)
        return [Schedule(client_id, self.serialized)]

    def memory(self, client_id: int, used: int, total: int, now: float) -> list[Decision]:
        """``client_id`` holds ``used`` bytes; ``total`` > 0 is the GPU's memory it saw."""
        client = self.clients.get(client_id)
        if client is None:
            return []
        client.bytes = max(0, used)
        if total > 0:
            self.reported_memory = total
        return self._resettle(now)

    def disconnect(self, client_id: int, now: float) -> list[Decision]:
        if client_id not in self.clients:
            return []
        if self.holder == client_id:
            self._account(now)
            self.holder, self.drop_at = None, None
        if client_id in self.queue:
            self.queue.remove(client_id)
        del self.clients[client_id]
        return self._resettle(now) + self._grant(now)

    # --- the lock -----------------------------------------------------------------------------

    def request(self, client_id: int, now: float) -> list[Decision]:
        if client_id not in self.clients or not self.serialized:
            return []
        if client_id != self.holder and client_id not in self.queue:
            self.queue.append(client_id)
        return self._grant(now) + self.tick(now)

    def released(self, client_id: int, now: float) -> list[Decision]:
        if client_id != self.holder:
            return []  # a late or duplicate release (or one after a revocation): nothing held
        self._account(now)
        if self.drop_at is not None:
            self._latency(now - self.drop_at)
        self.holder, self.drop_at = None, None
        return self._grant(now)

    def tick(self, now: float) -> list[Decision]:
        """The quantum check; call it at ``next_deadline()`` (and after any event)."""
        if self.holder is None:
            return []
        if self.drop_at is not None:
            grace = self.revoke_grace_s
            if grace is None or now < self.drop_at + self.tq_s + grace - _eps(now):
                return []
            victim = self.holder
            self._account(now)
            self._latency(now - self.drop_at)
            self.holder, self.drop_at = None, None
            self.revocations += 1
            return [Revoke(victim), *self._grant(now)]
        if now < self.grant_at + self.tq_s - _eps(now):
            return []
        if not self.queue:
            self._account(now)  # nobody waits: the holder is simply re-granted
            self.grant_at = now
            return []
        self.drop_at = now
        return [Drop(self.holder)]

    def next_deadline(self) -> float | None:
        if self.holder is None:
            return None
        if self.drop_at is not None:
            grace = self.revoke_grace_s
            return None if grace is None else self.drop_at + self.tq_s + grace
        return self.grant_at + self.tq_s

    def _grant(self, now: float) -> list[Decision]:
        if self.holder is not None or not self.queue or not self.serialized:
            return []
        nxt = self.queue.popleft()
        self.holder = nxt
        self.grant_at = now
        self.drop_at = None
        handover = self.last_holder is not None and self.last_holder != nxt
        if handover:
            self.handovers += 1
        self.last_holder = nxt
        self.clients[nxt].grants += 1
        return [Grant(nxt, handover)]

    def _account(self, now: float) -> None:
        if self.holder is not None and self.holder in self.clients:
            self.clients[self.holder].held_s += max(0.0, now - self.grant_at)
            self.grant_at = now

    def _latency(self, seconds: float) -> None:
        self.latencies.append(seconds)
        self.latency_sum += seconds
        self.latency_count += 1

    # --- reporting -------------------------------------------------------------------------------

    def status(self, now: float) -> GpuStatus:
        def view(c: Client) -> ClientStatus:
            held = c.held_s + (max(0.0, now - self.grant_at) if c.id == self.holder else 0.0)
            return ClientStatus(c.id, c.pid, c.name, c.bytes, held, c.grants)

        holder = None if self.holder is None else view(self.clients[self.holder])
        return GpuStatus(
            gpu=self.gpu,
            tq_s=self.tq_s,
            anti_thrashing=self.mode,
            serialized=self.serialized,
            holder=holder,
            waiting=tuple(view(self.clients[c]) for c in self.queue),
            clients=tuple(view(c) for c in self.clients.values()),
            handovers=self.handovers,
            revocations=self.revocations,
            revoke_grace_s=self.revoke_grace_s,
            memory_bytes=self.memory_bytes,
            working_set_bytes=self.working_set_bytes(),
            handover_latencies_s=tuple(self.latencies),
        )
