"""
TRPOPlus in rl-baselines3-zoo (``rl_zoo3``): the ``trpo_plus`` registration, its Optuna sampler and a fallback CLI.

After ``pip install sb3-trpo-plus`` (regular or editable), ``python -m rl_zoo3.train --algo trpo_plus ...`` works:
``sb3_trpo_plus_zoo.pth`` installs a lazy import hook (``_sb3_trpo_plus_zoo_hook``) that calls
:func:`patch_module` on each rl_zoo3 module right after it is imported; :data:`PATCHES` lists every change.
Where ``.pth`` files are not run (``python -S``, ``pip install --target``, the hook turned off with
``SB3_TRPO_PLUS_NO_ZOO_HOOK=1``), use this module's CLI, which registers first and then runs the zoo script::

    python -m sb3_trpo_plus.zoo train --env CartPole-v1          # --algo trpo_plus is the default here
    python -m sb3_trpo_plus.zoo enjoy --env CartPole-v1 -f logs/

or call :func:`register` before using rl_zoo3 from Python. See ``docs/zoo.md``.

This module imports rl_zoo3 only inside functions: importing it is cheap and does not need rl_zoo3.
"""

import functools
import inspect
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sb3_trpo_plus.hyperparameters import ALGO_NAME, HYPERPARAMS_PATH, convert_trpo_plus_params

if TYPE_CHECKING:
    import optuna

#: Model attributes that continuing training (``-i``) takes from the saved agent, not from the YAML file:
#: the trust region adapted by ``AdaptiveTrustRegionCallback`` and the decaying entropy bonus. A value given
#: on the command line (``-params target_kl:0.01``) still wins.
KEPT_ON_CONTINUE = ("target_kl", "cg_damping", "ent_coef", "ent_coef_decay", "min_ent_coef")
_PATCHED = "_sb3_trpo_plus_patched"
#: The global name of ``rl_zoo3.exp_manager`` through which ``hyperparameters_optimization`` calls ``create_study``
_OPTUNA_GLOBAL = "optuna"


def sample_trpo_plus_params(trial: "optuna.Trial", n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """
    Sampler for TRPOPlus hyperparameters (``-optimize``), in the style of rl_zoo3's ``sample_trpo_params``.

    Samples the rollout (``n_steps``, ``gamma``, ``gae_lambda``), the trust region (``target_kl``, ``cg_damping``),
    conjugate gradient (``cg_max_steps``, ``cg_sub_sampling_factor``), line search (``line_search_max_iter``,
    ``line_search_shrinking_factor``), entropy bonus (``ent_coef``, ``ent_coef_decay``, ``min_ent_coef`` as a
    fraction of ``ent_coef``), critic (``learning_rate``, ``batch_size``, ``n_critic_updates``) and network size.
    Like every zoo sampler, it replaces the YAML's ``policy_kwargs`` with ``net_arch`` and ``activation_fn``.

    :param trial: the Optuna trial
    :param n_actions: unused (action noise of off-policy samplers)
    :param n_envs: number of environments; ``batch_size`` is capped at ``n_steps * n_envs``
    :param additional_args: unused (HER settings of off-policy samplers)
    :return: keyword arguments for ``TRPOPlus``
    """
    n_steps_pow = trial.suggest_int("n_steps_pow", 5, 12)  # 32 .. 4096 steps per env
    batch_size_pow = trial.suggest_int("batch_size_pow", 5, 10)  # 32 .. 1024 (critic mini-batches)
    one_minus_gamma = trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True)
    one_minus_gae_lambda = trial.suggest_float("one_minus_gae_lambda", 0.0001, 0.1, log=True)
    # Trust region
    target_kl = trial.suggest_float("target_kl", 0.001, 0.1, log=True)
    cg_damping = trial.suggest_float("cg_damping", 0.001, 0.5, log=True)
    cg_max_steps = trial.suggest_int("cg_max_steps", 5, 30)
    cg_sub_sampling_factor = trial.suggest_categorical("cg_sub_sampling_factor", [1, 2, 4])
    line_search_max_iter = trial.suggest_int("line_search_max_iter", 5, 20)
    line_search_shrinking_factor = trial.suggest_categorical("line_search_shrinking_factor", [0.5, 0.6, 0.7, 0.8, 0.9])
    # Entropy bonus
    ent_coef = trial.suggest_float("ent_coef", 1e-5, 0.1, log=True)
    ent_coef_decay = trial.suggest_categorical("ent_coef_decay", [1.0, 0.9999, 0.9995, 0.999, 0.995])
    min_ent_coef_fraction = trial.suggest_categorical("min_ent_coef_fraction", [0.0, 0.1, 0.2, 0.5])
    # Critic
    learning_rate = trial.suggest_float("learning_rate", 1e-5, 0.002, log=True)
    n_critic_updates = trial.suggest_int("n_critic_updates", 5, 30)
    # Network
    net_arch = trial.suggest_categorical("net_arch", ["tiny", "small", "medium"])
    activation_fn = trial.suggest_categorical("activation_fn", ["tanh", "relu"])

    # Display true values
    trial.set_user_attr("gamma", 1 - one_minus_gamma)
    trial.set_user_attr("n_steps", 2**n_steps_pow)
    trial.set_user_attr("batch_size", 2**batch_size_pow)
    trial.set_user_attr("min_ent_coef", ent_coef * min_ent_coef_fraction)
    hyperparams = convert_trpo_plus_params(
        {
            "n_steps_pow": n_steps_pow,
            "batch_size_pow": batch_size_pow,
            "one_minus_gamma": one_minus_gamma,
            "one_minus_gae_lambda": one_minus_gae_lambda,
            "target_kl": target_kl,
            "cg_damping": cg_damping,
            "cg_max_steps": cg_max_steps,
            "cg_sub_sampling_factor": cg_sub_sampling_factor,
            "line_search_max_iter": line_search_max_iter,
            "line_search_shrinking_factor": line_search_shrinking_factor,
            "ent_coef": ent_coef,
            "ent_coef_decay": ent_coef_decay,
            "min_ent_coef_fraction": min_ent_coef_fraction,
            "learning_rate": learning_rate,
            "n_critic_updates": n_critic_updates,
            "net_arch": net_arch,
            "activation_fn": activation_fn,
        }
    )
    hyperparams["batch_size"] = min(hyperparams["batch_size"], hyperparams["n_steps"] * n_envs)
    return hyperparams


def register_minatar_envs() -> None:
    """Register MinAtar's Gymnasium ids (``MinAtar/Breakout-v1``, ...) if MinAtar is installed and they are not yet."""
    import gymnasium as gym

    if "MinAtar/Breakout-v1" in gym.registry:
        return
    try:
        from minatar.gym import register_envs
    except ImportError:
        return
    register_envs()


def _algorithm_class() -> type:
    from sb3_trpo_plus import TRPOPlus

    return TRPOPlus


@dataclass(frozen=True)
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

    name: str
    module: str
    relies_on: dict[str, tuple[str, ...]]
    apply: Callable[[ModuleType], None]


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


def _wrap_method(
    cls: type, method: str, patch_name: str, make_wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> None:
    """Replace ``cls.method`` by ``make_wrapper(original)``, once (the wrapper carries the patch's name)."""
    original = getattr(cls, method)
    if getattr(original, _PATCHED, None) == patch_name:
        return
    wrapper = functools.wraps(original)(make_wrapper(original))
    setattr(wrapper, _PATCHED, patch_name)
    setattr(cls, method, wrapper)


def _add_trpo_plus_to_algos(module: ModuleType) -> None:
    module.ALGOS[ALGO_NAME] = _algorithm_class()


def _add_trpo_plus_sampler(module: ModuleType) -> None:
    module.HYPERPARAMS_SAMPLER[ALGO_NAME] = sample_trpo_plus_params
    module.HYPERPARAMS_CONVERTER[ALGO_NAME] = convert_trpo_plus_params


def _register_minatar_envs(module: ModuleType) -> None:
    register_minatar_envs()


def _default_config_is_the_packaged_yaml(module: ModuleType) -> None:
    """Without ``-conf``, ``trpo_plus`` reads :data:`HYPERPARAMS_PATH` (rl_zoo3 would look inside its own installation)."""

    def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if self.algo == ALGO_NAME and signature.bind(self, *args, **kwargs).arguments.get("config") is None:
                self.config = str(HYPERPARAMS_PATH)

        return __init__

    _wrap_method(module.ExperimentManager, "__init__", "default_config_is_the_packaged_yaml", make_wrapper)


def _continue_keeps_adapted_values(module: ModuleType) -> None:
    """
    ``-i`` keeps the saved values of :data:`KEPT_ON_CONTINUE` (rl_zoo3 passes every YAML value to ``load()``, which
    would overwrite the adapted trust region), unless given on the command line.
    """

    def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        def _load_pretrained_agent(self: Any, hyperparams: dict[str, Any], env: Any) -> Any:
            if self.algo == ALGO_NAME:
                explicit = self.custom_hyperparams or {}
                hyperparams = {
                    key: value for key, value in hyperparams.items() if key not in KEPT_ON_CONTINUE or key in explicit
                }
            return original(self, hyperparams, env)

        return _load_pretrained_agent

    _wrap_method(module.ExperimentManager, "_load_pretrained_agent", "continue_keeps_adapted_values", make_wrapper)


def _lin_schedules_patch(module: ModuleType) -> None:
    """``ent_coef: lin_0.05`` and ``target_kl: lin_0.08`` become linear schedules, as ``learning_rate: lin_...`` does
    (rl_zoo3 converts only its own keys)."""

    def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        def _preprocess_hyperparams(self: Any, hyperparams: dict[str, Any]) -> Any:
            if self.algo == ALGO_NAME:
                hyperparams = _lin_schedules(hyperparams)
            return original(self, hyperparams)

        return _preprocess_hyperparams

    _wrap_method(module.ExperimentManager, "_preprocess_hyperparams", "lin_schedules", make_wrapper)


def _shared_study_heartbeat(module: ModuleType) -> None:
    """
    For ``--algo trpo_plus -optimize --storage ...``: the ``optuna.create_study`` that
    ``ExperimentManager.hyperparameters_optimization`` calls becomes
    :func:`sb3_trpo_plus.tuning.create_shared_study` (heartbeat and retry of trials whose worker died, exact
    ``--max-total-trials``; see ``docs/tuning.md``). rl_zoo3 passes the storage URL to ``optuna.create_study`` and has no
    option for a heartbeat, so while that method runs, the module's global name ``optuna`` is a stand-in for the
    ``optuna`` module with that one function replaced. Other algorithms, and runs without ``--storage``, go through
    unchanged.
    """
    real_optuna = getattr(module, _OPTUNA_GLOBAL)

    def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        def hyperparameters_optimization(self: Any) -> Any:
            if self.algo != ALGO_NAME or self.storage is None:
                return original(self)
            setattr(module, _OPTUNA_GLOBAL, _OptunaCreatingSharedStudies(real_optuna, self.max_total_trials))
            try:
                return original(self)
            finally:
                setattr(module, _OPTUNA_GLOBAL, real_optuna)

        return hyperparameters_optimization

    _wrap_method(module.ExperimentManager, "hyperparameters_optimization", "shared_study_heartbeat", make_wrapper)


class _OptunaCreatingSharedStudies(ModuleType):
    """The ``optuna`` module as ``rl_zoo3.exp_manager`` sees it during a trpo_plus study: ``create_study`` is ours."""

    def __init__(self, real_optuna: ModuleType, max_total_trials: int | None) -> None:
        super().__init__(real_optuna.__name__, real_optuna.__doc__)
        self._real_optuna = real_optuna
        self._max_total_trials = max_total_trials

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real_optuna, name)

    def create_study(self, **kwargs: Any) -> "optuna.Study":
        from sb3_trpo_plus.tuning import create_shared_study

        return create_shared_study(max_total_trials=self._max_total_trials, **kwargs)


#: The trpo_plus hyperparameters that may be ``lin_<number>`` in a YAML entry, with the smallest allowed start
LIN_SCHEDULES = {
    "ent_coef": ("a number >= 0", lambda start: start >= 0),
    "target_kl": ("a number > 0", lambda start: start > 0),
}


def _lin_schedules(hyperparams: dict[str, Any]) -> dict[str, Any]:
    """``ent_coef`` or ``target_kl`` given as ``lin_<value>``: a linear schedule of the progress remaining, from
    ``<value>`` at the start to 0 at the end, rl_zoo3's ``lin_`` convention for ``learning_rate``."""
    from rl_zoo3.utils import SimpleLinearSchedule

    converted = dict(hyperparams)
    for key, (allowed, rule) in LIN_SCHEDULES.items():
        value = hyperparams.get(key)
        if not isinstance(value, str):
            continue
        kind, _, initial = value.partition("_")
        try:
            initial_value = float(initial)
        except ValueError:
            initial_value = float("nan")
        if kind != "lin" or not (initial_value == initial_value and rule(initial_value)):
            raise ValueError(f"{key} must be {allowed} or 'lin_<number>' for trpo_plus, got {value!r}")
        converted[key] = SimpleLinearSchedule(initial_value)
    return converted


_MANAGER = "ExperimentManager"
#: Every change sb3-trpo-plus makes to rl_zoo3 (the one list: the import hook watches the ``rl_zoo3`` package and
#: :func:`patch_module` applies the patches of each module right after it ran)
PATCHES: tuple[ZooPatch, ...] = (
    ZooPatch("add_trpo_plus_to_algos", "rl_zoo3.utils", {"ALGOS": ()}, _add_trpo_plus_to_algos),
    ZooPatch(
        "add_trpo_plus_sampler",
        "rl_zoo3.hyperparams_opt",
        {"HYPERPARAMS_SAMPLER": (), "HYPERPARAMS_CONVERTER": (), "convert_onpolicy_params": ("sampled_params",)},
        _add_trpo_plus_sampler,
    ),
    ZooPatch("register_minatar_envs", "rl_zoo3.import_envs", {}, _register_minatar_envs),
    ZooPatch(
        "default_config_is_the_packaged_yaml",
        "rl_zoo3.exp_manager",
        {f"{_MANAGER}.__init__": ("algo", "config")},
        _default_config_is_the_packaged_yaml,
    ),
    ZooPatch(
        "continue_keeps_adapted_values",
        "rl_zoo3.exp_manager",
        {f"{_MANAGER}._load_pretrained_agent": ("hyperparams", "env")},
        _continue_keeps_adapted_values,
    ),
    ZooPatch(
        "lin_schedules",
        "rl_zoo3.exp_manager",
        {f"{_MANAGER}._preprocess_hyperparams": ("hyperparams",)},
        _lin_schedules_patch,
    ),
    ZooPatch(
        "shared_study_heartbeat",
        "rl_zoo3.exp_manager",
        {f"{_MANAGER}.hyperparameters_optimization": (), _OPTUNA_GLOBAL: ()},
        _shared_study_heartbeat,
    ),
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


def register() -> None:
    """
    Add ``trpo_plus`` to rl_zoo3 now (imports rl_zoo3). Not needed when the import hook is active, harmless then.
    Call it before rl_zoo3's scripts build their argument parsers (``--algo`` choices come from ``ALGOS``).
    """
    import importlib

    for name in dict.fromkeys(patch.module for patch in PATCHES):
        patch_module(importlib.import_module(name))


def main(argv: list[str] | None = None) -> None:
    """
    Fallback entry point (``python -m sb3_trpo_plus.zoo`` / ``sb3-trpo-plus-zoo``): register ``trpo_plus``, then run
    one of rl_zoo3's scripts (``train``, ``enjoy``, ``record_video``, ...) with the remaining arguments.
    ``--algo trpo_plus`` is added when no ``--algo`` is given.

    :param argv: ``[script, *arguments]``; ``sys.argv[1:]`` by default
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    scripts = ("train", "enjoy", "record_video", "record_training")
    if not argv or argv[0] not in scripts:
        raise SystemExit(f"usage: python -m sb3_trpo_plus.zoo {{{','.join(scripts)}}} [rl_zoo3 arguments]")
    script, arguments = argv[0], argv[1:]
    if not any(argument == "--algo" or argument.startswith("--algo=") for argument in arguments):
        arguments = ["--algo", ALGO_NAME, *arguments]
    register()
    # Same as ``python -m rl_zoo3.<script> ...``
    module_name = f"rl_zoo3.{script}"
    sys.argv = [module_name, *arguments]
    runpy.run_module(module_name, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
