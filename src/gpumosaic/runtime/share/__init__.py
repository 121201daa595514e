"""gpumosaic share: time-share one GPU between unmodified processes (in the spirit of nvshare).

A C interposer (``csrc/interposer.c``, LD_PRELOAD) turns ``cuMemAlloc`` into managed memory
and gates kernel launches and copies on a GPU lock; an asyncio daemon (``daemon.py``) grants
the lock first-come-first-served for a time quantum, one UNIX socket per GPU. The lock's
decisions live in ``sharing.lock.GpuLock`` (no clock of its own; the nvshare model drives
the same object); the wire format and its checks in ``protocol`` and ``limits``. Under
``serve --sharing nvshare:...``, ``node.NodeShareAgent`` (a Ray actor per node) runs and
restarts the daemons (``runtime/share/supervisor.py``).
"""

from gpumosaic.runtime.share.native import ShareError, build_library, library_path
from gpumosaic.sharing.lock import AntiThrashing, GpuLock, GpuStatus

__all__ = ["AntiThrashing", "GpuLock", "GpuStatus", "ShareError", "build_library", "library_path"]
