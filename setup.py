"""
Everything else is in setup.cfg. This file adds ``sb3_trpo_plus_zoo.pth`` to the wheels, regular and editable, and
makes the long description: README.md with its relative links made absolute (a package index shows the README
without the repository's files, so ``docs/zoo.md`` would be a broken link there).

The ``.pth`` file lands in site-packages, where Python runs its line at start-up: it imports
``_sb3_trpo_plus_zoo_hook`` (standard library only), which registers ``trpo_plus`` in rl_zoo3 when, and only when,
rl_zoo3 is imported. See docs/zoo.md.

- Regular wheel (``pip install .``): ``build_py`` writes the file at the root of ``build_lib``, which becomes the
  root of the wheel, i.e. site-packages.
- Editable wheel (``pip install -e .``, PEP 660): setuptools' ``editable_wheel`` does not copy ``build_lib`` into
  the wheel, so the file is added to the finished wheel, with its line in ``RECORD`` (``pip uninstall`` removes it).
"""

import base64
import hashlib
import os
import re
import shutil
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "sb3_trpo_plus_zoo.pth"
# Named to sort after setuptools' ``__editable__.*.pth``, which makes the hook importable in editable installs
PTH_CONTENT = b"import _sb3_trpo_plus_zoo_hook\n"

# Where the README's relative links point in the long description (files: blob/, folders: tree/ redirects to blob/)
REPOSITORY_URL = "https://github.com/sb3-trpo-plus/sb3-trpo-plus"


def long_description() -> str:
    """README.md with every relative link target (``[text](docs/zoo.md)``, ``[text](#heading)``) made absolute."""
    text = Path(__file__).with_name("README.md").read_text(encoding="utf-8")

    def absolute(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # a URL or a mailto:
            return match.group(0)
        if target.startswith("#"):  # a heading of the README: the repository's front page shows it with that anchor
            return f"{match.group(1)}({REPOSITORY_URL}{target})"
        return f"{match.group(1)}({REPOSITORY_URL}/blob/main/{target.lstrip('/')})"

    return re.sub(r"(\[[^\]]*\])\(([^)\s]+)\)", absolute, text)


class BuildPyWithPth(build_py):
    """``build_py`` that also writes the ``.pth`` file at the root of ``build_lib`` (not in editable mode)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):  # setuptools >= 64
            Path(self.build_lib, PTH_NAME).write_bytes(PTH_CONTENT)

    def get_outputs(self, *args, **kwargs) -> list[str]:
        outputs = super().get_outputs(*args, **kwargs)
        return outputs if getattr(self, "editable_mode", False) else [*outputs, os.path.join(self.build_lib, PTH_NAME)]


def _add_to_wheel(wheel_path: Path, name: str, content: bytes) -> None:
    """Rewrite ``wheel_path`` with ``name`` added at its root and listed in its ``RECORD`` (no-op if it is there)."""
    with zipfile.ZipFile(wheel_path) as source:
        if name in source.namelist():
            return
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        record_line = f"{name},sha256={digest},{len(content)}\n".encode()
        tmp_path = wheel_path.with_suffix(".tmp")
        with zipfile.ZipFile(tmp_path, "w", zipfile.ZIP_DEFLATED) as target:
            for item in source.infolist():
                data = source.read(item.filename)
                if item.filename.endswith(".dist-info/RECORD"):
                    # RECORD is the last entry of a wheel: the new file goes just before it
                    target.writestr(name, content)
                    data = data.rstrip(b"\n") + b"\n" + record_line
                target.writestr(item, data)
    shutil.move(tmp_path, wheel_path)


cmdclass: dict = {"build_py": BuildPyWithPth}

try:  # setuptools >= 64 (PEP 660)
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # pragma: no cover
    pass
else:

    class EditableWheelWithPth(editable_wheel):
        """``editable_wheel`` that adds the ``.pth`` file to the wheel it built."""

        def run(self) -> None:
            super().run()
            project = self.distribution.get_name().replace("-", "_")
            for wheel_path in Path(self.dist_dir).glob(f"{project}-*.whl"):
                _add_to_wheel(wheel_path, PTH_NAME, PTH_CONTENT)

    cmdclass["editable_wheel"] = EditableWheelWithPth


setup(cmdclass=cmdclass, long_description=long_description())
