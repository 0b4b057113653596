"""
The arguments of :class:`~sb3_trpo_plus.TRPOPlus`, checked in one place, once for each way in: at construction
(:func:`check_arguments`), on assignment of the settings callbacks may change (:class:`CheckedSetting`), and when
loading (:func:`check_loaded_model`: the same :func:`check_arguments` on the loaded model). Each check raises a
``ValueError`` naming the argument and what it allows.

This module uses nothing else of ``sb3_trpo_plus``.
"""

import difflib
import functools
import inspect
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.type_aliases import Schedule

SUPPORTED_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)

#: Argument names of hand-written TRPO scripts -> what TRPOPlus takes instead (docs/trpo_plus.md, "Names used in
#: hand-written TRPO scripts")
RENAMED_ARGUMENTS: dict[str, str] = {
    "max_kl": "target_kl",
    "delta": "target_kl",
    "damping": "cg_damping",
    "cg_iters": "cg_max_steps",
    "backtrack_coeff": "line_search_shrinking_factor",
    "alpha": "line_search_shrinking_factor",
    "backtrack_iters": "line_search_max_iter",
    "critic_train_iters": "n_critic_updates",
    "vf_iters": "n_critic_updates",
    "critic_lr": "learning_rate (the critic's)",
    "vf_lr": "learning_rate (the critic's)",
    "entropy_coef": "ent_coef",
    "ent_coeff": "ent_coef",
    "entropy_decay": "ent_coef_decay",
    "min_entropy_coef": "min_ent_coef",
    "rollout_steps": "n_steps (per environment: the batch is n_steps * n_envs)",
    "timesteps_per_batch": "n_steps (per environment: the batch is n_steps * n_envs)",
    "lam": "gae_lambda",
    "normalize_rewards": "VecNormalize(env, norm_obs=False, norm_reward=True) around the environment",
}


def check_renamed_arguments(names: Iterable[str]) -> None:
    """Raise a ``TypeError`` naming what to use instead of the first argument name of hand-written TRPO scripts."""
    for name in names:
        if name in RENAMED_ARGUMENTS:
            raise TypeError(
                f"TRPOPlus got an unexpected keyword argument {name!r}: use {RENAMED_ARGUMENTS[name]} instead "
                '(docs/trpo_plus.md, "Names used in hand-written TRPO scripts")'
            )


def check_argument_names(names: Iterable[str], allowed: Iterable[str]) -> None:
    """
    Raise a ``TypeError`` for the first name that is not ``allowed``: what to use instead for a name of hand-written
    TRPO scripts (:func:`check_renamed_arguments`), else the closest allowed names (a misspelling), else the list.
    """
    check_renamed_arguments(names)
    allowed = sorted(set(allowed))
    for name in names:
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"the arguments are {', '.join(allowed)}"
            raise TypeError(f"TRPOPlus got an unexpected keyword argument {name!r}: {hint}")


def pointing_to_new_names(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` raising :func:`check_argument_names`'s ``TypeError`` for an unknown keyword (its signature kept)."""
    parameters = [name for name in inspect.signature(init).parameters if name != "self"]

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        check_argument_names(kwargs, parameters)
        init(self, *args, **kwargs)

    return checked_init


class CheckedSetting:
    """
    A model attribute stored as ``_<name>`` whose every assignment is checked by :func:`check_setting` (a
    ``ValueError`` naming the attribute, and the old value kept), so that a callback or a user can never put a value
    into the update that it cannot use.

    :param default_from: attribute whose value is returned while this one has not been set yet
    """

    def __init__(self, default_from: str | None = None):
        self.default_from = default_from
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if self.default_from is not None and f"_{self.name}" not in obj.__dict__:
            return getattr(obj, self.default_from)
        return obj.__dict__[f"_{self.name}"]

    def __set__(self, obj: Any, value: Any) -> None:
        check_setting(self.name, value)
        check_setting_pair(obj, self.name, value)
        obj.__dict__[f"_{self.name}"] = value


def is_finite_real(value: Any) -> bool:
    """Whether ``value`` is a finite real number (a ``bool`` is not one)."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and bool(np.isfinite(value))
    )


def initial_value(value: Any) -> Any:
    """The value of a schedule at the start of training (progress remaining 1), or the value itself."""
    return value(1.0) if callable(value) else value


#: Settings of the update that callbacks and users may change during training (``model.target_kl = ...``,
#: ``TRPOPlus.load(path, target_kl=...)``): each is checked by its setter, at construction and when loading.
#: name -> (rule on a finite real number, what is allowed). ``target_kl`` and ``ent_coef`` may also be schedules of the
#: progress remaining (their value at progress 1 is checked).
TRAINING_SETTINGS: dict[str, tuple[Callable[[float], bool], str]] = {
    "target_kl": (lambda value: value > 0, "a finite number > 0, or a schedule whose value at progress 1 is one"),
    "cg_damping": (lambda value: value >= 0, "a finite number >= 0"),
    "initial_target_kl": (lambda value: value > 0, "a finite number > 0"),
    "initial_cg_damping": (lambda value: value >= 0, "a finite number >= 0"),
    "ent_coef": (lambda value: value >= 0, "a finite number >= 0, or a schedule whose value at progress 1 is one"),
    "ent_coef_decay": (lambda value: 0 < value <= 1, "a finite number in (0, 1] (1 disables the decay)"),
    "min_ent_coef": (lambda value: value >= 0, "a finite number >= 0"),
    "entropy_floor": (
        lambda value: 0 <= value < 1,
        "a number in [0, 1) (a fraction of the uniform policy's entropy; 0: no floor)",
    ),
}


#: The settings that may be schedules of the progress remaining (from 1 to 0), as ``learning_rate`` may
SCHEDULED_SETTINGS = ("target_kl", "ent_coef")


def check_setting(name: str, value: Any) -> None:
    """
    Raise a ``ValueError`` naming the setting and what it allows when ``value`` is not allowed.

    :param name: a key of :data:`TRAINING_SETTINGS`
    :param value: the value to check (a float, or for :data:`SCHEDULED_SETTINGS` also a schedule)
    """
    rule, allowed = TRAINING_SETTINGS[name]
    checked = initial_value(value) if name in SCHEDULED_SETTINGS else value
    if not (is_finite_real(checked) and rule(checked)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def check_min_ent_coef(ent_coef: Any, min_ent_coef: Any, changed: str = "min_ent_coef") -> None:
    """
    Raise a ``ValueError`` when ``min_ent_coef`` is above the initial ``ent_coef`` (its schedule's value at progress
    1), naming ``changed``, the one of the two just given.
    """
    initial_ent_coef = initial_value(ent_coef)
    if min_ent_coef > initial_ent_coef:
        if changed == "ent_coef":
            raise ValueError(
                f"ent_coef must start at or above min_ent_coef ({min_ent_coef}), got {ent_coef!r} (lower min_ent_coef first)"
            )
        raise ValueError(f"min_ent_coef must be between 0 and the initial ent_coef ({initial_ent_coef}), got {min_ent_coef!r}")


def check_setting_pair(model: Any, name: str, value: Any) -> None:
    """
    The rules between a setting and the model's other values, checked when the setting is assigned: the floor
    ``min_ent_coef`` is not above the initial ``ent_coef`` (a model that breaks it could be saved but not loaded), and
    an ``entropy_floor`` above 0 needs a discrete action space (:func:`entropy_floor_nats`).
    """
    if name == "entropy_floor" and getattr(model, "action_space", None) is not None:
        entropy_floor_nats(model.action_space, value)
    partner = {"ent_coef": "min_ent_coef", "min_ent_coef": "ent_coef"}.get(name)
    if partner is None or f"_{partner}" not in model.__dict__:
        return
    values = {name: value, partner: model.__dict__[f"_{partner}"]}
    check_min_ent_coef(values["ent_coef"], values["min_ent_coef"], changed=name)


def check_rollout_arguments(*, n_steps: Any, gamma: Any, gae_lambda: Any, learning_rate: Any) -> None:
    """
    Raise a ``ValueError`` naming the first of SB3's on-policy arguments outside its allowed range (checked before
    the environment is built, and again when a model is loaded).
    """
    if isinstance(n_steps, (bool, np.bool_)) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
    for name, value in (("gamma", gamma), ("gae_lambda", gae_lambda)):
        if not (is_finite_real(value) and 0 <= value <= 1):
            raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    initial_learning_rate = initial_value(learning_rate)
    if not (is_finite_real(initial_learning_rate) and initial_learning_rate >= 0):
        raise ValueError(
            "learning_rate must be a finite number >= 0, or a schedule whose value at progress 1 is one, "
            f"got {learning_rate!r}"
        )


def check_policy_batch(normalize_advantage: bool, n_steps: int, n_envs: int, sub_sampling_factor: int) -> None:
    """Raise a ``ValueError`` when advantage normalization would divide by the standard deviation of one sample."""
    policy_batch_size = -(-n_steps * n_envs // sub_sampling_factor)
    if normalize_advantage and policy_batch_size <= 1:
        raise ValueError(
            "normalize_advantage=True needs a policy batch of at least 2 samples, but "
            f"n_steps * n_envs / sub_sampling_factor = {n_steps} * {n_envs} / "
            f"{sub_sampling_factor} gives {policy_batch_size}: raise n_steps or set normalize_advantage=False"
        )


def check_arguments(
    *,
    n_steps: int,
    gamma: float,
    gae_lambda: float,
    learning_rate: float | Schedule,
    batch_size: int,
    cg_max_steps: int,
    cg_damping: float,
    cg_sub_sampling_factor: int,
    line_search_shrinking_factor: float,
    line_search_max_iter: int,
    n_critic_updates: int,
    ent_coef: float | Schedule,
    ent_coef_decay: float,
    min_ent_coef: float,
    entropy_floor: float,
    target_kl: float | Schedule,
    sub_sampling_factor: int,
    stats_window_size: int,
    critic_kl_fraction: float,
    actor_trains_features: bool,
    critic_policy_coef: float,
    critic_policy_clip_range: float | None,
) -> None:
    """Raise a ``ValueError`` naming the first argument outside its allowed range."""
    check_rollout_arguments(n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda, learning_rate=learning_rate)
    for name, value in (
        ("target_kl", target_kl),
        ("cg_damping", cg_damping),
        ("ent_coef", ent_coef),
        ("ent_coef_decay", ent_coef_decay),
        ("min_ent_coef", min_ent_coef),
        ("entropy_floor", entropy_floor),
    ):
        check_setting(name, value)
    if not (is_finite_real(line_search_shrinking_factor) and 0 < line_search_shrinking_factor < 1):
        raise ValueError(f"line_search_shrinking_factor must be in (0, 1), got {line_search_shrinking_factor!r}")
    for name, value, minimum in (
        ("line_search_max_iter", line_search_max_iter, 1),
        ("cg_max_steps", cg_max_steps, 1),
        ("cg_sub_sampling_factor", cg_sub_sampling_factor, 1),
        ("sub_sampling_factor", sub_sampling_factor, 1),
        ("batch_size", batch_size, 1),
        ("n_critic_updates", n_critic_updates, 0),
        ("stats_window_size", stats_window_size, 1),
    ):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    check_min_ent_coef(ent_coef, min_ent_coef)
    if not isinstance(actor_trains_features, (bool, np.bool_)):
        raise ValueError(f"actor_trains_features must be True or False, got {actor_trains_features!r}")
    if not (is_finite_real(critic_kl_fraction) and 0 <= critic_kl_fraction < 1):
        raise ValueError(f"critic_kl_fraction must be a number in [0, 1), got {critic_kl_fraction!r}")
    if not (is_finite_real(critic_policy_coef) and critic_policy_coef >= 0):
        raise ValueError(f"critic_policy_coef must be a finite number >= 0, got {critic_policy_coef!r}")
    if critic_policy_coef > 0 and critic_kl_fraction == 0:
        raise ValueError(
            f"critic_policy_coef > 0 ({critic_policy_coef}) needs critic_kl_fraction > 0: only then does the critic "
            "train the shared features extractor"
        )
    if n_critic_updates == 0 and critic_kl_fraction > 0 and not actor_trains_features:
        raise ValueError(
            f"n_critic_updates=0 with critic_kl_fraction > 0 ({critic_kl_fraction}) and actor_trains_features=False "
            "would leave the shared features extractor untrained for good (only the critic trains it): give "
            "n_critic_updates >= 1, or actor_trains_features=True"
        )
    if critic_policy_clip_range is not None:
        if not (is_finite_real(critic_policy_clip_range) and critic_policy_clip_range > 0):
            raise ValueError(f"critic_policy_clip_range must be None or a finite number > 0, got {critic_policy_clip_range!r}")
        if critic_policy_coef == 0:
            raise ValueError(
                f"critic_policy_clip_range ({critic_policy_clip_range}) needs critic_policy_coef > 0: it clips the "
                "policy's objective in the critic's loss, which is only there with critic_policy_coef > 0"
            )


#: The arguments :func:`check_arguments` takes, by name
CHECKED_ARGUMENTS = tuple(inspect.signature(check_arguments).parameters)


def unusable_setting(target_kl: Any, cg_damping: Any, ent_coef: Any, learning_rate: Any) -> tuple[str, str] | None:
    """
    The failure reason and a message when a value an update would use is unusable (it got past the setters, e.g.
    through ``ent_coef_schedule``, a learning-rate schedule or a private attribute), else ``None``.

    :param ent_coef: the entropy coefficient of the update (schedule, decay and floor applied)
    :param learning_rate: the critic's learning rate of the update (its schedule applied)
    """
    for name, value in (("target_kl", target_kl), ("cg_damping", cg_damping), ("ent_coef", ent_coef)):
        try:
            check_setting(name, value)
        except ValueError as error:
            return f"invalid_{name}", f"{error} (the value this update would use)"
    if not (is_finite_real(learning_rate) and learning_rate >= 0):
        return "invalid_learning_rate", f"learning_rate must be a finite number >= 0, got {learning_rate!r} (its schedule)"
    return None


def check_model_arguments(model: Any) -> None:
    """Check a model's values of the constructor's arguments as the constructor does (the same ``ValueError``)."""
    # (SB3 keeps stats_window_size as _stats_window_size)
    names = [name for name in CHECKED_ARGUMENTS if name != "stats_window_size"]
    check_arguments(**{name: getattr(model, name) for name in names}, stats_window_size=model._stats_window_size)
    if model.env is not None:
        check_policy_batch(model.normalize_advantage, model.n_steps, model.env.num_envs, model.sub_sampling_factor)


def check_loaded_model(model: Any) -> None:
    """
    Check what SB3's ``load`` wrote straight into a model's ``__dict__`` (past the setters) before anything uses it:
    every argument of the constructor, as the constructor checks it.

    ``load`` builds the model with default arguments, then ``__dict__.update``s the saved data and its own keyword
    arguments: a checkpoint of sb3-contrib TRPO (or of an older TRPOPlus) and ``load(path, target_kl=...)`` hold
    ``target_kl``, ``cg_damping``, ... as plain attributes, which the checked settings would hide; they go through
    the setters here (a keyword argument of ``load`` over the saved value), and so do the values a TRPOPlus
    checkpoint stores.
    """
    # (all taken out first, so that a pair rule is checked once both values are back, whatever their order)
    values = {
        name: model.__dict__.pop(name) if name in model.__dict__ else model.__dict__.pop(f"_{name}")
        for name in TRAINING_SETTINGS
        if name in model.__dict__ or f"_{name}" in model.__dict__
    }
    for name, value in values.items():
        setattr(model, name, value)
    if "stats_window_size" in model.__dict__:  # (load(path, stats_window_size=...) writes the public name)
        model._stats_window_size = model.__dict__.pop("stats_window_size")
    check_model_arguments(model)


def uniform_entropy(action_space: spaces.Space) -> float | None:
    """
    The entropy of the uniform policy over ``action_space`` (in nats, summed over the action's components as SB3's
    distributions sum it), the largest any policy has; ``None`` for a Box space, which has no largest.
    """
    if isinstance(action_space, spaces.Discrete):
        return float(np.log(action_space.n))
    if isinstance(action_space, spaces.MultiDiscrete):
        return float(np.sum(np.log(action_space.nvec)))
    if isinstance(action_space, spaces.MultiBinary):
        return float(np.prod(action_space.shape) * np.log(2.0))
    return None


def entropy_floor_nats(action_space: spaces.Space, entropy_floor: float) -> float:
    """
    ``entropy_floor`` (a fraction of the uniform policy's entropy) in nats on ``action_space``; a ``ValueError`` for
    a floor on a Box space, whose entropy has no largest value to take a fraction of.
    """
    if entropy_floor == 0:
        return 0.0
    largest = uniform_entropy(action_space)
    if largest is None:
        raise ValueError(
            f"entropy_floor ({entropy_floor}) needs a discrete action space (Discrete, MultiDiscrete, MultiBinary), "
            f"whose uniform policy's entropy it takes a fraction of; the env's is {action_space}: use entropy_floor=0"
        )
    return entropy_floor * largest


def check_policy_fits(policy_class: type, observation_space: spaces.Space) -> None:
    """Raise a ``ValueError`` when a policy for Dict observations is given another space (SB3 checks the reverse)."""
    from stable_baselines3.common.policies import MultiInputActorCriticPolicy

    if issubclass(policy_class, MultiInputActorCriticPolicy) and not isinstance(observation_space, spaces.Dict):
        raise ValueError(
            f"policy MultiInputPolicy takes Dict observation spaces, but the env's is {observation_space}: use "
            "MlpPolicy for vectors, or CnnPolicy for images"
        )


def check_environment(
    action_space: spaces.Space, n_steps: int, n_envs: int, batch_size: int, normalize_advantage: bool, sub_sampling_factor: int
) -> None:
    """
    Raise a ``ValueError`` for an action space TRPOPlus does not support or a policy batch of one sample; warn, as
    SB3's PPO does, when ``batch_size`` does not divide the rollout.
    """
    if not isinstance(action_space, SUPPORTED_ACTION_SPACES):
        raise ValueError(
            f"TRPOPlus does not support the action space {action_space} (env): "
            f"allowed are {', '.join(space.__name__ for space in SUPPORTED_ACTION_SPACES)}"
        )
    check_policy_batch(normalize_advantage, n_steps, n_envs, sub_sampling_factor)
    buffer_size = n_envs * n_steps
    if buffer_size % batch_size > 0:
        warnings.warn(
            f"You have specified a mini-batch size of {batch_size},"
            f" but because the `RolloutBuffer` is of size `n_steps * n_envs = {buffer_size}`,"
            f" after every {buffer_size // batch_size} untruncated mini-batches,"
            f" there will be a truncated mini-batch of size {buffer_size % batch_size}\n"
            f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
            f"Info: (n_steps={n_steps} and n_envs={n_envs})"
        )
