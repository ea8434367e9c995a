"""The wheel carries the integrations' files (``ctxd/bundled/``), so ``ctxd setup`` works from a wheel alone.

Everything else is in pyproject.toml. The files stay where they are developed (integrations/, editors/,
clients/); this build step copies them into the built package. An editable install reads them from the
checkout instead (``ctxd.setup.bundle``).
"""

from __future__ import annotations

import os
import runpy
import shutil

from setuptools import setup
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


setup(cmdclass={"build_py": BuildWithBundle})
