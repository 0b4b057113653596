"""
The rollout as the batch of one update: observations (their images scaled once), actions, old log-probabilities and
advantages, and the sub-samples drawn from it.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.type_aliases import PyTorchObs

from sb3_trpo_plus.buffers import scaled_images
from sb3_trpo_plus.finite import all_finite, is_finite


def index_obs(obs: PyTorchObs, index: slice | th.Tensor) -> PyTorchObs:
    if isinstance(obs, dict):
        return {key: value[index] for key, value in obs.items()}
    return obs[index]


def sub_sample(n_samples: int, factor: int, device: th.device) -> slice | th.Tensor:
    """The index of ``ceil(n_samples / factor)`` samples drawn at random without replacement (all of them for 1)."""
    if factor == 1:
        return slice(None)
    return th.randperm(n_samples, device=device)[: -(-n_samples // factor)]


@dataclass
class PolicyBatch:
    """
    The batch of one policy update.

    :param obs: observations
    :param actions: actions taken
    :param old_log_prob: their log-probabilities under the policy that collected them
    :param advantages: their advantages (normalized if asked)
    :param features: the shared features of the whole rollout at the actor's current parameters, when the update
        computed them anyway (shared features extractor, no ``sub_sampling_factor``): the critic update reuses them
    :param actor_features: the features the step's distributions are computed from, when the step leaves the
        features extractor alone (``actor_trains_features=False``): computed once, the extractor is not run again
    """

    obs: PyTorchObs
    actions: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    features: th.Tensor | None = None
    actor_features: th.Tensor | None = None

    def is_finite(self) -> bool:
        return all_finite(self.obs) and is_finite(self.advantages) and is_finite(self.old_log_prob)

    def minibatch(self, index: th.Tensor) -> "PolicyBatch":
        """The samples at ``index`` (observations, actions, old log-probs and advantages)."""
        return PolicyBatch(index_obs(self.obs, index), self.actions[index], self.old_log_prob[index], self.advantages[index])


@contextlib.contextmanager
def images_normalized_once(policy: BasePolicy, observations: PyTorchObs, in_place: bool = False) -> Iterator[PyTorchObs]:
    """
    The observations with their images scaled to ``[0, 1]`` once, and the policy told not to scale them again while
    the context lasts.

    SB3's ``preprocess_obs`` converts image observations from ``uint8`` and divides them by 255 at every forward pass.
    One update runs the actor and the critic on the whole rollout several times (gradient, line-search candidates,
    critic epochs); on 1024 Atari frames each conversion costs about half a forward pass of NatureCNN on CPU. The
    scaling here is ``preprocess_obs``'s own arithmetic (:func:`~sb3_trpo_plus.buffers.scaled_images`), so the update
    is bit-identical. Only SB3's
    actor-critic policies whose feature extraction goes through ``policy.normalize_images`` are handled; any other
    policy gets the observations unchanged.

    :param policy: the policy being trained
    :param observations: the rollout's observations
    :param in_place: scale the ``float32`` images of ``observations`` themselves, without a copy (the caller owns them)
    :return: the observations to train on
    """
    standard = isinstance(policy, ActorCriticPolicy) and all(
        getattr(type(policy), method) is getattr(ActorCriticPolicy, method)
        for method in ("extract_features", "predict_values", "get_distribution")
    )
    if not (standard and policy.normalize_images):
        yield observations
        return

    def scaled(obs: th.Tensor, space: spaces.Space) -> th.Tensor:
        return scaled_images(obs, in_place) if is_image_space(space) else obs

    if isinstance(observations, dict):
        assert isinstance(policy.observation_space, spaces.Dict)
        normalized: PyTorchObs = {key: scaled(obs, policy.observation_space[key]) for key, obs in observations.items()}
    else:
        normalized = scaled(observations, policy.observation_space)
    policy.normalize_images = False
    try:
        yield normalized
    finally:
        policy.normalize_images = True
