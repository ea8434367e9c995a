"""The wheel carries the integrations' files (``ctxd/bundled/``), so ``ctxd setup`` works from a wheel alone, and
the compiled scanner ``ctxd._native`` when a C compiler is there.

Everything else is in pyproject.toml. The files stay where they are developed (integrations/, editors/,
clients/); this build step copies them into the built package. An editable install reads them from the
checkout instead (``ctxd.setup.bundle``).

The extension is optional: without a compiler (an sdist on a bare machine) the build warns and the install goes
on, and ctxd scans in pure Python with the same answers. It uses only CPython's limited API (3.11), so one wheel
per platform, tagged ``cp311-abi3``, serves every CPython from 3.11 on.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE = runpy.run_path(os.path.join(HERE, "ctxd", "setup", "bundle.py"))["BUNDLE"]


class BuildWithBundle(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name, (folder, paths) in BUNDLE.items():
            for rel in paths:
                src = os.path.join(HERE, folder, rel)
                dst = os.path.join(self.build_lib, "ctxd", "bundled", name, rel)
                if os.path.isdir(src):
                    shutil.copytree(src, dst, dirs_exist_ok=True)
                elif os.path.isfile(src):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy2(src, dst)


class BuildNative(build_ext):
    """``-O3`` and ``-pthread`` where the compiler takes them (gcc and clang; MSVC's flags differ and its
    defaults are kept).

    On Linux the module names libc among its needs even when it calls nothing from it (gcc links with
    ``--as-needed`` on Debian and Ubuntu): auditwheel tells glibc from musl by that entry and refuses a module
    without one, so ``make dist`` could not make the manylinux wheel.
    """

    def build_extensions(self) -> None:
        if self.compiler.compiler_type in ("unix", "mingw32", "cygwin"):
            for ext in self.extensions:
                # -pthread: the read-ahead thread (on a glibc before 2.34, pthread_create lives in libpthread).
                ext.extra_compile_args = [*ext.extra_compile_args, "-O3", "-pthread"]
                ext.extra_link_args = [*ext.extra_link_args, "-pthread"]
                if sys.platform.startswith("linux"):
                    ext.extra_link_args = [*ext.extra_link_args, "-Wl,--no-as-needed", "-lc"]
        super().build_extensions()


NATIVE = Extension(
    "ctxd._native",
    ["ctxd/_native.c"],
    optional=True,
    py_limited_api=True,
    define_macros=[("Py_LIMITED_API", "0x030B0000")],
)

setup(
    ext_modules=[NATIVE],
    cmdclass={"build_py": BuildWithBundle, "build_ext": BuildNative},
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
