"""
Registers ``trpo_plus`` in rl-baselines3-zoo (``rl_zoo3``) when, and only when, rl_zoo3 is imported.

Installing ``sb3-trpo-plus`` puts ``sb3_trpo_plus_zoo.pth`` into site-packages. Python runs its single line
(``import _sb3_trpo_plus_zoo_hook``) at interpreter start, so this module must stay cheap: it uses the standard
library only and does nothing but put a finder on ``sys.meta_path``. rl_zoo3, torch and ``sb3_trpo_plus`` are not
imported here.

The finder watches the rl_zoo3 package. When one of its modules is imported, the regular import machinery finds and
runs it as usual; right after it has run, :func:`patch_module` applies the patches of that module (:data:`PATCHES`, the
one list of them). They register names only: ``sb3_trpo_plus`` (and torch through it) is imported when ``trpo_plus``
is used, never in a process that runs another algorithm, and nothing rl_zoo3 defines is replaced. Any error there (a
name a patch relies on that rl_zoo3 renamed included) becomes a warning naming the patch: rl_zoo3 keeps working for its
own algorithms.

Set the environment variable ``SB3_TRPO_PLUS_NO_ZOO_HOOK=1`` to turn the hook off; ``python -m sb3_trpo_plus.zoo``
registers ``trpo_plus`` without it. See ``docs/zoo.md``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at interpreter start (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

# The package whose modules may get a patch after they run (which ones: ``PATCHES``)
WATCHED_PACKAGE = "rl_zoo3"
DISABLE_VARIABLE = "SB3_TRPO_PLUS_NO_ZOO_HOOK"
#: The algorithm's name in rl_zoo3 (``sb3_trpo_plus.hyperparameters.ALGO_NAME``; not imported from there: that would
#: import ``sb3_trpo_plus``)
ALGO_NAME = "trpo_plus"


# --- the patches -------------------------------------------------------------------------------------------------


class ZooPatch:
    """
    One change to rl_zoo3, named after what it changes; :data:`PATCHES` lists them all.

    :param name: what it changes
    :param module: the rl_zoo3 module it changes (the import hook applies it right after that module ran)
    :param relies_on: the rl_zoo3 names it uses, each with the parameters it calls it with (``()`` for a value):
        :func:`check_patch` looks them up before the patch is applied, so that a name rl_zoo3 renamed or whose
        parameters changed stops the patch with an error naming both, instead of a patch that silently does nothing
    :param apply: the change, given the module (idempotent)
    """

    __slots__ = ("apply", "module", "name", "relies_on")

    def __init__(
        self, name: str, module: str, relies_on: dict[str, tuple[str, ...]], apply: Callable[[ModuleType], None]
    ) -> None:
        self.name = name
        self.module = module
        self.relies_on = relies_on
        self.apply = apply

    def __repr__(self) -> str:
        return f"ZooPatch({self.name!r}, {self.module!r})"


class OnFirstUse:
    """
    A registry entry (``ALGOS["trpo_plus"]``, ``HYPERPARAMS_SAMPLER["trpo_plus"]``, ...) standing for
    ``module.name`` until it is first called or one of its attributes is read (``.load``, ``.__name__``): then the
    module is imported and the real object takes the entry's place.
    """

    def __init__(self, registry: dict, key: str, module: str, name: str) -> None:
        self._registry = registry
        self._key = key
        self._module = module
        self._name = name

    def resolve(self) -> Any:
        """Import the real object and put it in the entry's place."""
        import importlib

        target = getattr(importlib.import_module(self._module), self._name)
        if self._registry.get(self._key) is self:
            self._registry[self._key] = target
        return target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Private and special names (copy, pickle, introspection) do not import anything
        if name.startswith("_") and name not in ("__name__", "__qualname__"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"<{self._module}.{self._name}, imported on first use>"


def _add_trpo_plus_to_algos(module: ModuleType) -> None:
    module.ALGOS.setdefault(ALGO_NAME, OnFirstUse(module.ALGOS, ALGO_NAME, "sb3_trpo_plus", "TRPOPlus"))


def _add_trpo_plus_sampler(module: ModuleType) -> None:
    for registry, where, name in (
        (module.HYPERPARAMS_SAMPLER, "sb3_trpo_plus.zoo", "sample_trpo_plus_params"),
        (module.HYPERPARAMS_CONVERTER, "sb3_trpo_plus.hyperparameters", "convert_trpo_plus_params"),
    ):
        registry.setdefault(ALGO_NAME, OnFirstUse(registry, ALGO_NAME, where, name))


def command_line_algo(argv: Sequence[str]) -> str | None:
    """The ``--algo`` of a zoo command line (``--algo X``, ``--algo=X``, or an abbreviation as argparse takes it)."""
    for index, argument in enumerate(argv):
        option, equals, value = argument.partition("=")
        if len(option) > 2 and "--algo".startswith(option):
            if equals:
                return value
            return argv[index + 1] if index + 1 < len(argv) else None
    return None


def _register_minatar_envs_for_trpo_plus_commands(module: ModuleType) -> None:
    """The zoo's scripts check ``--env`` against the registry before anything else, so MinAtar's ids must be there by
    then; they are registered for ``--algo trpo_plus`` command lines only (its YAML has MinAtar entries)."""
    if command_line_algo(sys.argv[1:]) == ALGO_NAME:
        from sb3_trpo_plus.zoo import register_minatar_envs

        register_minatar_envs()


def _algo_argument(cls: type, args: tuple, kwargs: dict) -> Any:
    if "algo" in kwargs:
        return kwargs["algo"]
    import inspect

    try:
        return inspect.signature(cls).bind_partial(*args, **kwargs).arguments.get("algo")
    except (TypeError, ValueError):  # the wrong arguments: ``__init__`` says so
        return None


def _experiment_manager_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``ExperimentManager.__new__``: an experiment manager for ``trpo_plus`` is an instance of ``cls`` with
    ``sb3_trpo_plus.zoo.TRPOPlusExperimentManagerMixin`` in front; any other is made as before (``object.__new__``)."""
    if not getattr(cls, "is_trpo_plus_experiment_manager", False) and _algo_argument(cls, args, kwargs) == ALGO_NAME:
        from sb3_trpo_plus.zoo import trpo_plus_experiment_manager

        cls = trpo_plus_experiment_manager(cls)
    return object.__new__(cls)


def _trpo_plus_experiment_manager(module: ModuleType) -> None:
    manager = module.ExperimentManager
    new = vars(manager).get("__new__")
    if new is not None:
        if getattr(new, "__func__", new) is _experiment_manager_new:
            return
        raise RuntimeError(f"{module.__name__}.ExperimentManager has its own __new__ in this rl_zoo3 version")
    import inspect

    # ``inspect.signature(ExperimentManager)`` stays that of rl_zoo3's ``__init__`` (it would read ``__new__``'s)
    _experiment_manager_new.__signature__ = inspect.signature(manager.__init__)  # type: ignore[attr-defined]
    manager.__new__ = staticmethod(_experiment_manager_new)


_MANAGER = "ExperimentManager"
#: Every change sb3-trpo-plus makes to rl_zoo3 (the one list: the import hook watches the ``rl_zoo3`` package and
#: :func:`patch_module` applies the patches of each module right after it ran). Each acts for ``trpo_plus`` only;
#: docs/zoo.md has a table of them.
PATCHES: tuple[ZooPatch, ...] = (
    ZooPatch("add_trpo_plus_to_algos", "rl_zoo3.utils", {"ALGOS": ()}, _add_trpo_plus_to_algos),
    ZooPatch(
        "add_trpo_plus_sampler",
        "rl_zoo3.hyperparams_opt",
        {"HYPERPARAMS_SAMPLER": (), "HYPERPARAMS_CONVERTER": (), "convert_onpolicy_params": ("sampled_params",)},
        _add_trpo_plus_sampler,
    ),
    ZooPatch(
        "register_minatar_envs_for_trpo_plus_commands",
        "rl_zoo3.import_envs",
        {},
        _register_minatar_envs_for_trpo_plus_commands,
    ),
    ZooPatch(
        "trpo_plus_experiment_manager",
        "rl_zoo3.exp_manager",
        {
            f"{_MANAGER}.__init__": ("args", "algo", "env_id", "config", "storage", "max_total_trials"),
            f"{_MANAGER}._preprocess_hyperparams": ("hyperparams",),
            f"{_MANAGER}._load_pretrained_agent": ("hyperparams", "env"),
            f"{_MANAGER}.hyperparameters_optimization": (),
            "optuna.create_study": ("storage", "sampler", "pruner", "study_name", "load_if_exists", "direction"),
        },
        _trpo_plus_experiment_manager,
    ),
)


def _resolve(module: ModuleType, dotted: str) -> Any:
    target: Any = module
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def check_patch(patch: ZooPatch, module: ModuleType) -> None:
    """
    Raise a ``RuntimeError`` naming the patch when a name it relies on is missing from ``module`` or lost a parameter.

    :param patch: the patch
    :param module: the rl_zoo3 module it is about to change
    """
    import inspect

    for dotted, parameters in patch.relies_on.items():
        try:
            target = _resolve(module, dotted)
        except AttributeError:
            raise RuntimeError(
                f"sb3-trpo-plus patch {patch.name!r} cannot be applied: {module.__name__}.{dotted} no longer exists "
                "in this rl_zoo3 version"
            ) from None
        missing = [name for name in parameters if name not in inspect.signature(target).parameters]
        if missing:
            raise RuntimeError(
                f"sb3-trpo-plus patch {patch.name!r} cannot be applied: {module.__name__}.{dotted} has no parameter "
                f"{', '.join(missing)} in this rl_zoo3 version"
            )


def patch_module(module: ModuleType) -> None:
    """
    Apply the :data:`PATCHES` of one rl_zoo3 module (idempotent; nothing for a module without any); called by the
    import hook right after the module ran.

    :param module: an rl_zoo3 module
    """
    for patch in PATCHES:
        if patch.module == module.__name__:
            check_patch(patch, module)
            patch.apply(module)


# --- the import hook ---------------------------------------------------------------------------------------------


def _patch(module: ModuleType) -> None:
    try:
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
