"""Fair turns on one GPU's lock: no user and no process can keep another from its turn.

``sharing.lock.GpuLock`` grants its queue first-come-first-served, which is right for the
clients of one job but not across owners: a user who registers 128 clients (the daemon's
cap per user, ``limits``) and has each ask for the lock is served 128 quanta before a
process that asked after them. Here the next turn goes to the waiting client of the
user served least recently (round robin over users); among that user's waiting clients,
to the one of its process served least recently (round robin over its processes); among
that process's clients, first come first served. The owner of a client is what the
socket says of its peer (SO_PEERCRED: uid and pid), never what it claims in REGISTER.

So a waiting client has its turn after at most ``U - 1`` turns of other users (``U``:
users waiting), ``P - 1`` turns of its user's other processes (``P``: its user's
processes waiting) and its own process's earlier connections (at most
``limits.MAX_CONNECTIONS_PER_PROCESS``), whatever any one owner asks. The lock's other
rules (quantum, drop, revocation, anti-thrashing) are ``GpuLock``'s, unchanged.
"""

from __future__ import annotations

import itertools

from gpumosaic.sharing.lock import Decision, GpuLock

Owner = tuple[int, int]  # (uid, pid) of a client's peer; (-1, -1) when unknown


class FairGpuLock(GpuLock):
    """``GpuLock`` whose next holder is chosen by owner (see module doc)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.owner_of: dict[int, Owner] = {}  # client -> its peer's (uid, pid)
        self._turns = itertools.count(1)
        self._user_served: dict[int, int] = {}  # uid -> its last turn's number
        self._process_served: dict[Owner, int] = {}

    def own(self, client_id: int, owner: Owner) -> None:
        """``client_id`` (registered) belongs to ``owner``."""
        self.owner_of[client_id] = owner

    def disconnect(self, client_id: int, now: float) -> list[Decision]:
        owner = self.owner_of.pop(client_id, None)
        decisions = super().disconnect(client_id, now)
        if owner is not None:  # what is remembered of owners is bounded by those connected
            owners = set(self.owner_of.values())
            if owner not in owners:
                self._process_served.pop(owner, None)
            if all(o[0] != owner[0] for o in owners):
                self._user_served.pop(owner[0], None)
        return decisions

    def _next(self) -> int:
        """The fair next holder among the waiting clients (the queue's index)."""
        owner_of = self.owner_of

        def order(item: tuple[int, int]) -> tuple[int, int, int]:
            position, client = item
            owner = owner_of.get(client, (-1, -1))
            user = self._user_served.get(owner[0], 0)
            process = self._process_served.get(owner, 0)
            return user, process, position

        return min(enumerate(self.queue), key=order)[0]

    def _grant(self, now: float) -> list[Decision]:
        if self.holder is None and self.queue and self.serialized:
            k = self._next()
            if k:  # the chosen one first, the others in their order
                chosen = self.queue[k]
                del self.queue[k]
                self.queue.appendleft(chosen)
            owner = self.owner_of.get(self.queue[0], (-1, -1))
            turn = next(self._turns)
            self._user_served[owner[0]] = turn
            self._process_served[owner] = turn
        return super()._grant(now)
