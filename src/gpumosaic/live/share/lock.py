"""The GPU lock of one GPU: who holds it, who waits, when a quantum ends. No clock, no I/O.

The daemon feeds it events with the time they happened (``now``, seconds on a monotonic
clock) and sends the messages it returns. Rules (nvshare's, plus ``auto``):

* anti-thrashing **on**: one holder at a time; REQ_LOCK queues FCFS; the holder keeps the
  lock for ``tq_s``; when that expires and someone waits it gets DROP_LOCK (once), and the
  next in line gets LOCK_OK when it answers LOCK_RELEASED; a holder nobody waits for keeps
  the lock for another quantum. A holder may release early (idle) at any time;
* **off**: everybody runs (SCHED_OFF), the queue is emptied;
* **auto**: serialize only while the registered working sets (each client's managed
  allocations, reported with MEM) exceed the GPU's memory, and let everybody run while
  they fit. Every switch is broadcast (SCHED_ON / SCHED_OFF);
* a client that disconnects or dies leaves at once: if it held the lock, the next in
  line gets it immediately.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from gpumosaic.live.share.protocol import Message, MessageType, message

DEFAULT_TQ_S = 30.0
LATENCY_WINDOW = 4096  # hand-over latencies kept for the p50/p99 gauges


class AntiThrashing(StrEnum):
    ON = "on"
    OFF = "off"
    AUTO = "auto"


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``message`` to client ``client_id``."""

    client_id: int
    message: Message


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
    memory_bytes: int | None
    working_set_bytes: int
    handover_latencies_s: tuple[float, ...] = field(default=(), repr=False)

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
            "memory_bytes": self.memory_bytes,
            "working_set_bytes": self.working_set_bytes,
        }


class GpuLock:
    """The lock of one GPU (see module doc). Methods return the messages to send."""

    def __init__(
        self,
        gpu: int,
        tq_s: float = DEFAULT_TQ_S,
        anti_thrashing: AntiThrashing = AntiThrashing.AUTO,
        memory_bytes: int | None = None,
    ) -> None:
        if tq_s <= 0:
            raise ValueError(f"tq_s must be > 0, got {tq_s}")
        self.gpu = gpu
        self.tq_s = tq_s
        self.mode = anti_thrashing
        self.fixed_memory = memory_bytes
        self.reported_memory: int | None = None
        self.clients: dict[int, Client] = {}
        self.queue: deque[int] = deque()
        self.holder: int | None = None
        self.last_holder: int | None = None
        self.grant_at = 0.0
        self.drop_at: float | None = None
        self.handovers = 0
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.serialized = self._should_serialize()

    # --- memory and mode ------------------------------------------------------------------

    @property
    def memory_bytes(self) -> int | None:
        return self.fixed_memory if self.fixed_memory is not None else self.reported_memory

    def working_set_bytes(self) -> int:
        return sum(c.bytes for c in self.clients.values())

    def _should_serialize(self) -> bool:
        if self.mode is AntiThrashing.ON:
            return True
        if self.mode is AntiThrashing.OFF:
            return False
        memory = self.memory_bytes
        return memory is not None and self.working_set_bytes() > memory

    def _resettle(self, now: float) -> list[Send]:
        """Switch between serialized and free-running if the rule says so; broadcast it."""
        serialize = self._should_serialize()
        if serialize == self.serialized:
            return []
        self.serialized = serialize
        if self.holder is not None:
            self._account(now)
        self.holder, self.drop_at = None, None
        self.queue.clear()
        kind = MessageType.SCHED_ON if serialize else MessageType.SCHED_OFF
        return [Send(cid, message(kind, id=f"{cid:016x}")) for cid in self.clients]

    def set_mode(self, mode: AntiThrashing, now: float) -> list[Send]:
        self.mode = mode
        return self._resettle(now)

    def set_tq(self, tq_s: float, now: float) -> list[Send]:
        if tq_s <= 0:
            raise ValueError(f"tq must be > 0, got {tq_s}")
        self.tq_s = tq_s
        return self.tick(now)

    # --- clients ----------------------------------------------------------------------------

    def register(self, client_id: int, pid: int, name: str, now: float) -> list[Send]:
        self.clients[client_id] = Client(client_id, pid, name, now)
        kind = MessageType.SCHED_ON if self.serialized else MessageType.SCHED_OFF
        return [Send(client_id, message(kind, id=f"{client_id:016x}"))]

    def memory(self, client_id: int, used: int, total: int, now: float) -> list[Send]:
        client = self.clients.get(client_id)
        if client is None:
            return []
        client.bytes = max(0, used)
        if total > 0:
            self.reported_memory = total
        return self._resettle(now)

    def disconnect(self, client_id: int, now: float) -> list[Send]:
        if client_id not in self.clients:
            return []
        out: list[Send] = []
        if self.holder == client_id:
            self._account(now)
            self.holder, self.drop_at = None, None
        if client_id in self.queue:
            self.queue.remove(client_id)
        del self.clients[client_id]
        out += self._resettle(now)
        out += self._grant(now)
        return out

    # --- the lock -----------------------------------------------------------------------------

    def request(self, client_id: int, now: float) -> list[Send]:
        if client_id not in self.clients or not self.serialized:
            return []
        if client_id != self.holder and client_id not in self.queue:
            self.queue.append(client_id)
        return self._grant(now) + self.tick(now)

    def released(self, client_id: int, now: float) -> list[Send]:
        if client_id != self.holder:
            return []  # a late or duplicate release: nothing held
        self._account(now)
        if self.drop_at is not None:
            latency = now - self.drop_at
            self.latencies.append(latency)
            self.latency_sum += latency
            self.latency_count += 1
        self.holder, self.drop_at = None, None
        return self._grant(now)

    def tick(self, now: float) -> list[Send]:
        """The quantum check; call it at ``next_deadline()`` (and after any event)."""
        if self.holder is None or self.drop_at is not None:
            return []
        if now < self.grant_at + self.tq_s - 1e-9:
            return []
        if not self.queue:
            self._account(now)  # nobody waits: the holder is simply re-granted
            self.grant_at = now
            return []
        self.drop_at = now
        return [Send(self.holder, message(MessageType.DROP_LOCK))]

    def next_deadline(self) -> float | None:
        if self.holder is None or self.drop_at is not None:
            return None
        return self.grant_at + self.tq_s

    def _grant(self, now: float) -> list[Send]:
        if self.holder is not None or not self.queue or not self.serialized:
            return []
        nxt = self.queue.popleft()
        self.holder = nxt
        self.grant_at = now
        self.drop_at = None
        if self.last_holder is not None and self.last_holder != nxt:
            self.handovers += 1
        self.last_holder = nxt
        self.clients[nxt].grants += 1
        return [Send(nxt, message(MessageType.LOCK_OK))]

    def _account(self, now: float) -> None:
        if self.holder is not None and self.holder in self.clients:
            self.clients[self.holder].held_s += max(0.0, now - self.grant_at)
            self.grant_at = now

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
            memory_bytes=self.memory_bytes,
            working_set_bytes=self.working_set_bytes(),
            handover_latencies_s=tuple(self.latencies),
        )
