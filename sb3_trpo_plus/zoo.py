"""
TRPOPlus in rl-baselines3-zoo (``rl_zoo3``): what ``--algo trpo_plus`` does differently (its experiment manager and
Optuna sampler), the registration, and a fallback CLI.

After ``pip install sb3-trpo-plus`` (regular or editable), ``python -m rl_zoo3.train --algo trpo_plus ...`` works:
``sb3_trpo_plus_zoo.pth`` installs a lazy import hook (``_sb3_trpo_plus_zoo_hook``) whose patches (its ``PATCHES``)
register the name ``trpo_plus`` in rl_zoo3 as each rl_zoo3 module is imported. This module, and the rest of
``sb3_trpo_plus``, is imported only once ``trpo_plus`` is used. Where ``.pth`` files are not run (``python -S``,
``pip install --target``, the hook turned off with ``SB3_TRPO_PLUS_NO_ZOO_HOOK=1``), use this module's CLI, which
registers first and then runs the zoo script::

    python -m sb3_trpo_plus.zoo train --env CartPole-v1          # --algo trpo_plus is the default here
    python -m sb3_trpo_plus.zoo enjoy --env CartPole-v1 -f logs/

or call :func:`register` before using rl_zoo3 from Python. See ``docs/zoo.md``.

This module imports rl_zoo3 only inside functions: importing it is cheap and does not need rl_zoo3.
"""

import functools
import inspect
import runpy
import sys
import warnings
from types import FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

from sb3_trpo_plus.hyperparameters import ALGO_NAME, HYPERPARAMS_PATH, convert_trpo_plus_params

if TYPE_CHECKING:
    import optuna
    from rl_zoo3.exp_manager import ExperimentManager

    _ManagerBase = ExperimentManager
else:
    _ManagerBase = object

#: Model attributes that continuing training (``-i``) takes from the saved agent, not from the YAML file:
#: the trust region adapted by ``AdaptiveTrustRegionCallback`` and the decaying entropy bonus. A value given
#: on the command line (``-params target_kl:0.01``) still wins.
KEPT_ON_CONTINUE = ("target_kl", "cg_damping", "ent_coef", "ent_coef_decay", "min_ent_coef")
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


class TRPOPlusExperimentManagerMixin(_ManagerBase):
    """
    What rl_zoo3's ``ExperimentManager`` does differently for ``--algo trpo_plus``. An experiment manager made with
    ``algo="trpo_plus"`` is an instance of this class mixed into rl_zoo3's (:func:`trpo_plus_experiment_manager`; the
    import hook's ``ExperimentManager.__new__`` picks it); other algorithms get rl_zoo3's class, unchanged.

    - Without ``-conf``, the hyperparameters are read from :data:`HYPERPARAMS_PATH` (rl_zoo3 would look inside its own
      installation); MinAtar's ids are registered first, for the YAML's MinAtar entries.
    - ``ent_coef: lin_0.05`` and ``target_kl: lin_0.08`` become linear schedules, as ``learning_rate: lin_...`` does
      (rl_zoo3 converts only its own keys).
    - ``-i`` keeps the saved values of :data:`KEPT_ON_CONTINUE` (rl_zoo3 passes every YAML value to ``load()``, which
      would overwrite the adapted trust region), unless given on the command line.
    - ``-optimize --storage ...`` opens the study with :func:`sb3_trpo_plus.tuning.create_shared_study` (heartbeat and
      retry of trials whose worker died, exact ``--max-total-trials``; see ``docs/tuning.md``).
    """

    is_trpo_plus_experiment_manager = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        register_minatar_envs()  # before rl_zoo3's __init__ looks the env id up in the registry
        super().__init__(*args, **kwargs)
        if not inspect.signature(super().__init__).bind(*args, **kwargs).arguments.get("config"):
            self.config = str(HYPERPARAMS_PATH)

    def _preprocess_hyperparams(self, hyperparams: dict[str, Any]) -> Any:
        return super()._preprocess_hyperparams(_lin_schedules(hyperparams))

    def _load_pretrained_agent(self, hyperparams: dict[str, Any], env: Any) -> Any:
        explicit = self.custom_hyperparams or {}
        kept = {key: value for key, value in hyperparams.items() if key not in KEPT_ON_CONTINUE or key in explicit}
        return super()._load_pretrained_agent(kept, env)

    def hyperparameters_optimization(self) -> None:
        """
        rl_zoo3's, which passes ``--storage`` to ``optuna.create_study`` and has no option for a heartbeat. With a
        storage, it runs as a copy of rl_zoo3's function whose global ``optuna`` is :class:`_OptunaCreatingSharedStudies`:
        the module's own global is never replaced, so other threads and other algorithms see Optuna unchanged.
        """
        optimize = super().hyperparameters_optimization
        function = getattr(optimize, "__func__", None)
        if self.storage is None:
            return optimize()
        if not isinstance(function, FunctionType) or _OPTUNA_GLOBAL not in function.__code__.co_names:
            warnings.warn(
                "sb3-trpo-plus: rl_zoo3's hyperparameters_optimization no longer calls optuna.create_study: "
                "the study has no heartbeat and --max-total-trials is rl_zoo3's",
                stacklevel=2,
            )
            return optimize()
        shared = _OptunaCreatingSharedStudies(function.__globals__[_OPTUNA_GLOBAL], self.max_total_trials)
        return _with_global(function, _OPTUNA_GLOBAL, shared)(self)


@functools.cache
def trpo_plus_experiment_manager(base: type) -> type:
    """
    The class of a ``trpo_plus`` experiment manager: :class:`TRPOPlusExperimentManagerMixin` mixed into ``base``.

    :param base: rl_zoo3's ``ExperimentManager``, or a subclass of it
    :return: the subclass of ``base``
    """
    return type(f"TRPOPlus{base.__name__}", (TRPOPlusExperimentManagerMixin, base), {"__module__": __name__})


def _with_global(function: FunctionType, name: str, value: Any) -> FunctionType:
    """A copy of ``function`` that sees ``value`` as its global ``name`` (its module's globals are left alone)."""
    copy = FunctionType(
        function.__code__,
        {**function.__globals__, name: value},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


class _OptunaCreatingSharedStudies(ModuleType):
    """The ``optuna`` module as a trpo_plus study's ``hyperparameters_optimization`` sees it: ``create_study`` is ours."""

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


def register() -> None:
    """
    Add ``trpo_plus`` to rl_zoo3 now (imports rl_zoo3), and register MinAtar's ids. Not needed when the import hook is
    active, harmless then. Call it before rl_zoo3's scripts build their argument parsers (``--algo`` choices come from
    ``ALGOS``).
    """
    import importlib

    import _sb3_trpo_plus_zoo_hook as hook

    for name in dict.fromkeys(patch.module for patch in hook.PATCHES):
        hook.patch_module(importlib.import_module(name))
    register_minatar_envs()


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
