"""gpumosaic's compiled kernels: numba's on-disk cache keyed by every kernel source, numba
imported only when a kernel is first compiled or loaded, and the ahead-of-time library.

numba keys a cached function by its own file (its modification time and size) only: a
kernel that calls a kernel of another file would keep its old machine code after that
other file changed, and decide with the old arithmetic. Every kernel module takes
``njit`` from here instead of from numba: its cache lives in a directory named by a hash
of all the kernel sources (``KERNEL_SOURCES``) and numba's version, so a change to any
kernel compiles them all afresh. A test checks that every module that compiles with
numba is listed.

Where: ``$NUMBA_CACHE_DIR/gpumosaic-kernels-HASH`` when that variable is set, else
``__pycache__/numba/kernels-HASH`` in the installed package, or, where the package is
read-only, ``$XDG_CACHE_HOME/gpumosaic`` (``~/.cache/gpumosaic``). A directory of an
older hash is not used again; it may be deleted.

numba's import and its first cached load cost ~0.6 s of every command (the import, its
target's registries, scipy's BLAS probe), more than a whole fill run. So ``njit`` returns a
``Kernel``: numba is imported, and every kernel made a numba dispatcher, only when some
kernel runs without ahead-of-time code. The ahead-of-time (AOT) library
(``gpumosaic.kernel_aot``, built once by ``make`` or ``gpumosaic kernels``) is
extension modules in a user cache keyed by the same hash and the CPU (``kernel_aot.aot_dir``),
holding the kernels a command runs, for the argument types declared in
``data/kernel_exports.json``, compiled by numba from the same sources for this CPU:
a call whose arguments match one of them runs it without numba; any other call, or any
kernel it lacks, goes through numba's dispatcher. The types are checked in Python before
an AOT call (an AOT function trusts its arguments' types): per call (``Kernel.__call__``)
or once for arguments that keep their types (``resolve``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

from gpumosaic.kernel_sources import KERNEL_SOURCES, PACKAGE_ROOT, cache_dir, sources_digest

__all__ = ["KERNEL_SOURCES", "PACKAGE_ROOT", "cache_dir", "sources_digest"]

F = TypeVar("F", bound=Callable[..., Any])


def njit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(cache=True, **options)`` with the cache in ``cache_dir()``, made on
    first use (a ``Kernel``)."""
    options.setdefault("cache", True)

    def later(func: F) -> F:
        return cast(F, Kernel(func, options))

    return later


class _NumbaName:
    """A numba object a kernel module names at import (``objmode``), resolved with the
    kernels."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


objmode: Any = _NumbaName("objmode")

_KERNELS: list[Kernel] = []


class Kernel:
    """One kernel: its Python source function, numba's dispatcher once any kernel needs
    numba, and the AOT library's functions for the argument types it holds."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = py_func
        self.options = options
        self.key = f"{py_func.__module__}.{py_func.__qualname__}"
        self._dispatcher: Any = None
        self._aot: tuple[tuple[Any, Callable[..., Any]], ...] | None = None
        self.called_from_python = False  # an entry point (not only another kernel's callee)
        functools.update_wrapper(self, py_func, updated=())
        _KERNELS.append(self)

    def dispatcher(self) -> Any:
        """numba's dispatcher of this kernel (imports numba and makes every kernel's)."""
        if self._dispatcher is None:
            _make_dispatchers()
        return self._dispatcher

    def compiled(self) -> list[Any]:
        """numba's signatures (with return types) compiled or loaded in this process so far
        (a kernel's callees only have theirs when numba compiled them here)."""
        d = self._dispatcher
        return [] if d is None else [d.overloads[s].signature for s in d.signatures]

    def forget_aot(self) -> None:
        """Look this kernel up in the AOT library again on its next call."""
        self._aot = None

    def aot(self) -> tuple[tuple[Any, Callable[..., Any]], ...]:
        """(argument guard, function) of each AOT export of this kernel."""
        if self._aot is None:
            from gpumosaic.kernel_aot import aot_library

            self._aot = aot_library().get(self.key, ())
        return self._aot

    def resolve(self, *args: Any) -> Callable[..., Any]:
        """The function to call with ``args`` (and with any arguments of the same types):
        an AOT export whose types match, else numba's dispatcher."""
        self.called_from_python = True
        for guard, function in self._aot if self._aot is not None else self.aot():
            if guard(args):
                return function
        return self._dispatcher or self.dispatcher()

    def __call__(self, *args: Any) -> Any:
        # resolve's work inline: this runs for every call made through the kernel's name.
        for guard, function in self._aot if self._aot is not None else self.aot():
            if guard(args):
                return function(*args)
        self.called_from_python = True
        return (self._dispatcher or self.dispatcher())(*args)

    def __getattr__(self, name: str) -> Any:  # the dispatcher's API (signatures, ...)
        if name.startswith("__") or name in ("_dispatcher", "_aot"):  # copy, pickle
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __repr__(self) -> str:
        return f"<kernel {self.key}>"


def kernels() -> tuple[Kernel, ...]:
    """Every kernel defined so far (in the modules imported)."""
    return tuple(_KERNELS)


def resolve(kernel: Callable[..., Any], *args: Any) -> Callable[..., Any]:
    """``kernel``'s function for ``args`` (see ``Kernel.resolve``): for a call made many
    times with arguments that keep their types, checked once."""
    if isinstance(kernel, Kernel):
        return kernel.resolve(*args)
    return kernel


def jit(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s numba dispatcher: numba's JIT for every call, never the AOT library
    (a kernel that calls back into Python, numba's object mode, needs it)."""
    if not isinstance(kernel, Kernel):
        return kernel
    kernel.called_from_python = True
    return kernel.dispatcher()


def _make_dispatchers() -> None:
    """Import numba and make every kernel's dispatcher; numba types a ``Kernel`` as its
    dispatcher (a kernel calling another resolves it from its module's globals)."""
    import numba
    from numba.core import config as numba_config
    from numba.core import types
    from numba.extending import typeof_impl

    global _TYPED
    if not _TYPED:
        typeof_impl.register(Kernel)(lambda kernel, c: types.Dispatcher(kernel.dispatcher()))
        _TYPED = True
    config: Any = numba_config  # its settings are set at import, untyped
    saved = config.CACHE_DIR
    # numba picks a function's cache directory when it is decorated, from config.CACHE_DIR.
    config.CACHE_DIR = str(cache_dir())
    try:
        for kernel in _KERNELS:
            if kernel._dispatcher is None:
                kernel._dispatcher = numba.njit(**kernel.options)(kernel.py_func)
    finally:
        config.CACHE_DIR = saved
    for module in {k.py_func.__module__ for k in _KERNELS}:
        names = vars(sys.modules[module])
        for name, value in list(names.items()):
            if isinstance(value, _NumbaName):
                names[name] = getattr(numba, value.name)


_TYPED = False  # numba's typeof knows ``Kernel``


def use_aot_library(library: Any) -> None:
    """Use ``library`` (a ``kernel_aot.Library``) from now on (None: look the cache's up
    again on the next call); every kernel looks its exports up again."""
    from gpumosaic.kernel_aot import set_library

    set_library(library)
    for kernel in kernels():
        kernel.forget_aot()


def kernels_ran() -> str:
    """What ran the compiled kernels in this process so far, for a command's ``--json``:
    ``aot`` (the ahead-of-time library's exports), ``jit`` (numba compiled or loaded
    them), ``aot+jit`` (both: some calls' argument types are not exported) or ``none``.
    Read from the kernels' state, not counted on the call path."""
    aot = any(kernel._aot for kernel in kernels())
    jit = any(kernel.compiled() for kernel in kernels())
    return {(True, True): "aot+jit", (True, False): "aot", (False, True): "jit"}.get(
        (aot, jit), "none"
    )
