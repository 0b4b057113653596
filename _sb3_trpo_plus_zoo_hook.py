"""
Registers ``trpo_plus`` in rl-baselines3-zoo (``rl_zoo3``) when, and only when, rl_zoo3 is imported.

Installing ``sb3-trpo-plus`` puts ``sb3_trpo_plus_zoo.pth`` into site-packages. Python runs its single line
(``import _sb3_trpo_plus_zoo_hook``) at interpreter start, so this module must stay cheap: it uses the standard
library only and does nothing but put a finder on ``sys.meta_path``. rl_zoo3, torch and ``sb3_trpo_plus``
are not imported here.

The finder watches the rl_zoo3 package. When one of its modules is imported, the regular import machinery finds
and runs it as usual; right after it has run, :func:`sb3_trpo_plus.zoo.patch_module` applies the patches of that
module (``sb3_trpo_plus.zoo.PATCHES``, the one list of them: ``ALGOS``, the Optuna sampler, the default
hyperparameter file, env registration, ...). Any error there (a name a patch relies on that rl_zoo3 renamed
included) becomes a warning naming the patch: rl_zoo3 keeps working for its own algorithms.

Set the environment variable ``SB3_TRPO_PLUS_NO_ZOO_HOOK=1`` to turn the hook off; ``python -m sb3_trpo_plus.zoo``
registers ``trpo_plus`` without it. See ``docs/zoo.md``.
"""

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# The package whose modules may get a patch after they run (which ones: ``sb3_trpo_plus.zoo.PATCHES``)
WATCHED_PACKAGE = "rl_zoo3"
DISABLE_VARIABLE = "SB3_TRPO_PLUS_NO_ZOO_HOOK"


def _patch(module: ModuleType) -> None:
    try:
        from sb3_trpo_plus.zoo import patch_module

        patch_module(module)
    except Exception as error:  # never break rl_zoo3 because of this plugin
        import warnings

        warnings.warn(f"sb3-trpo-plus could not add trpo_plus to {module.__name__}: {error!r}", stacklevel=2)


class _PatchingLoader:
    """Wraps the loader of a watched module: runs the module, then patches it."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Give the module its real loader back (``inspect``, ``importlib.reload`` and ``linecache`` use it)
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        self.loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


class ZooImportHook:
    """``sys.meta_path`` finder that only answers for the modules of :data:`WATCHED_PACKAGE`, by asking the other finders."""

    is_sb3_trpo_plus_zoo_hook = True

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None):
        if not fullname.startswith(f"{WATCHED_PACKAGE}."):
            return None
        for finder in sys.meta_path:
            if getattr(finder, "is_sb3_trpo_plus_zoo_hook", False):
                continue
            find_spec = getattr(finder, "find_spec", None)
            spec = None if find_spec is None else find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader)
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), unless ``SB3_TRPO_PLUS_NO_ZOO_HOOK`` is set."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return
    if any(getattr(finder, "is_sb3_trpo_plus_zoo_hook", False) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, ZooImportHook())
    # rl_zoo3 already imported (the hook was installed late): patch what is there
    for name in sorted(sys.modules):
        if name.startswith(f"{WATCHED_PACKAGE}."):
            _patch(sys.modules[name])


install()
