"""
Non-finite numbers (NaN, inf) kept away from the weights: the checks, the environment wrapper the rollout is collected
through, and the messages that name the likely cause and ``VecCheckNan``.

This module uses nothing else of ``sb3_trpo_plus``.
"""

import math
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

#: Rollouts in a row holding NaN or inf (their updates skipped) after which training stops with an error
MAX_NON_FINITE_ROLLOUTS_IN_A_ROW = 10


def is_finite(tensor: th.Tensor) -> bool:
    """
    Whether every entry of ``tensor`` is finite, exactly, at the cost of one sum in the usual case.

    A NaN or an infinite entry makes the sum NaN or infinite; a non-finite sum of finite entries (an overflow) is
    told apart by checking the entries one by one. On 1024 Atari frames ``th.isfinite(x).all()`` alone costs about a
    tenth of a second on CPU (a boolean copy of the whole batch), the sum a few milliseconds.
    """
    return bool(th.isfinite(tensor.sum())) or bool(th.isfinite(tensor).all())


def is_finite_array(array: np.ndarray) -> bool:
    """:func:`is_finite` for a NumPy array (an overflowing sum is not warned about: the entries are checked then)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(array.sum())) or bool(np.isfinite(array).all())


class FiniteObservations(VecEnvWrapper):
    """
    The environment as the rollout's policy sees it: NaN and inf in its observations replaced by 0, and
    ``met_non_finite`` set when there were some.

    A NaN observation would otherwise stop the rollout inside the action distribution (its logits or mean are NaN),
    while an inf one often goes through (``tanh(inf)`` is finite): with this, both are collected the same way, and
    ``train`` skips the update on the rollout that met them. The policy is left as it is (a callback may copy or pickle
    it during the rollout).

    :param venv: the environment collecting the rollout
    """

    def __init__(self, venv: VecEnv):
        super().__init__(venv)
        self.met_non_finite = False

    def finite(self, obs: VecEnvObs) -> VecEnvObs:
        """The observations, with NaN and inf replaced by 0 (a copy only where there are some)."""
        arrays: list[np.ndarray] = list(obs.values()) if isinstance(obs, dict) else [obs]  # type: ignore[list-item]
        if all(is_finite_array(array) for array in arrays if np.issubdtype(array.dtype, np.floating)):
            return obs
        self.met_non_finite = True
        if isinstance(obs, dict):
            return {key: np.nan_to_num(value, nan=0.0, posinf=0.0, neginf=0.0) for key, value in obs.items()}
        return np.nan_to_num(obs, nan=0.0, posinf=0.0, neginf=0.0)  # type: ignore[arg-type]

    def reset(self) -> VecEnvObs:
        return self.finite(self.venv.reset())

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        return self.finite(obs), rewards, dones, infos


def non_finite_statistics(vec_normalize: VecNormalize | None) -> list[str]:
    """The running statistics that ``vec_normalize`` normalizes with (observations, returns) holding NaN or inf."""
    if vec_normalize is None:
        return []
    statistics: dict[str, RunningMeanStd] = {}
    if vec_normalize.norm_obs:
        obs_rms = vec_normalize.obs_rms
        statistics = (
            {f"obs_rms[{key!r}]": rms for key, rms in obs_rms.items()} if isinstance(obs_rms, dict) else {"obs_rms": obs_rms}
        )
    if vec_normalize.norm_reward:
        statistics["ret_rms"] = vec_normalize.ret_rms
    return [name for name, rms in statistics.items() if not (np.isfinite(rms.mean).all() and np.isfinite(rms.var).all())]


def non_finite_entries(state: Any, prefix: str = "") -> list[str]:
    """The names of the floating-point tensors and floats holding NaN or inf in a nested (optimizer) state dict."""
    if isinstance(state, th.Tensor):
        return [prefix] if state.is_floating_point() and not bool(th.isfinite(state).all()) else []
    if isinstance(state, float):
        return [prefix] if not math.isfinite(state) else []
    if isinstance(state, dict):
        return [entry for key, value in state.items() for entry in non_finite_entries(value, f"{prefix}.{key}".lstrip("."))]
    if isinstance(state, (list, tuple)):
        return [entry for i, value in enumerate(state) for entry in non_finite_entries(value, f"{prefix}[{i}]")]
    return []


def non_finite_rollout(buffer: RolloutBuffer, met_non_finite_obs: bool) -> tuple[str, str] | None:
    """
    The failure reason and a message when the rollout holds NaN or inf, else ``None``.

    :param buffer: the rollout
    :param met_non_finite_obs: whether the rollout's policy met non-finite observations (acted on them as 0)
    """
    observations = buffer.observations
    parts: dict[str, list[Any]] = {
        "observations": list(observations.values()) if isinstance(observations, dict) else [observations],
        "rewards": [buffer.rewards],
        "returns and advantages": [buffer.returns, buffer.advantages],
        "value predictions": [buffer.values],
        "log-probabilities": [buffer.log_probs],
    }
    non_finite = [
        name
        for name, arrays in parts.items()
        if (name == "observations" and met_non_finite_obs)
        or any(np.issubdtype(array.dtype, np.floating) and not is_finite_array(array) for array in arrays)
    ]
    if not non_finite:
        return None
    return "non_finite_input", (
        f"the rollout holds NaN or inf in its {', '.join(non_finite)}. This is bad data, not a line-search "
        "failure: neither the policy nor the critic was updated, and the trust region was left as it is. Likely "
        "cause: the environment (or a wrapper such as VecNormalize) returned a NaN or inf observation or reward; "
        "a gamma or gae_lambda that is not finite gives non-finite returns too. To stop at the step that produces "
        "them, wrap the environment in stable_baselines3.common.vec_env.VecCheckNan(env, raise_exception=True)."
    )


def stop_if_untrainable(vec_normalize: VecNormalize | None, n_non_finite_in_a_row: int) -> None:
    """
    Raise a ``RuntimeError`` once non-finite data has left the run nothing to train on: the running statistics of
    the environment's ``VecNormalize`` hold NaN or inf (everything it normalizes is then non-finite for good), or
    ``MAX_NON_FINITE_ROLLOUTS_IN_A_ROW`` rollouts in a row held NaN or inf.
    """
    statistics = non_finite_statistics(vec_normalize)
    if statistics:
        cause = (
            f"the running statistics of the environment's VecNormalize ({', '.join(statistics)}) hold NaN or inf, "
            "so every rollout from now on will too"
        )
    elif n_non_finite_in_a_row >= MAX_NON_FINITE_ROLLOUTS_IN_A_ROW:
        cause = f"the last {n_non_finite_in_a_row} rollouts held NaN or inf (their updates were skipped)"
    else:
        return
    raise RuntimeError(
        f"TRPOPlus cannot train: {cause}. Likely cause: the environment returned a NaN or inf observation or reward "
        "(one is enough to poison VecNormalize's statistics for good). To stop at the step that produces it, wrap the "
        "environment in stable_baselines3.common.vec_env.VecCheckNan(env, raise_exception=True), below any "
        "VecNormalize."
    )
