"""Build step of the install: compile the share interposer (C) from source with the
machine's C compiler into the package (gpumosaic/runtime/share/_native/). Everything else
is declared in pyproject.toml. Without a compiler the install still succeeds and the
library is built on first use (or `gpumosaic share run` says why it cannot be)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent


def _native_module():
    path = ROOT / "src" / "gpumosaic" / "runtime" / "share" / "native.py"
    sys.path.insert(0, str(ROOT / "src"))
    try:
        spec = importlib.util.spec_from_file_location("_gpumosaic_share_native", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


class BuildWithInterposer(build_py):
    def run(self) -> None:
        super().run()
        native = _native_module()
        targets = [ROOT / "src" / "gpumosaic" / "runtime" / "share" / "_native"]
        if not getattr(self, "editable_mode", False):
            targets.append(Path(self.build_lib) / "gpumosaic" / "runtime" / "share" / "_native")
        for target in targets:
            try:
                built = native.build_library(native.INTERPOSER, target)
                print(f"gpumosaic: built {built}")
            except Exception as err:  # the install must not fail for want of a compiler
                print(f"gpumosaic: warning: {err}; it will be built on first use")


setup(cmdclass={"build_py": BuildWithInterposer})
