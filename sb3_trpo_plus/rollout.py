"""
The rollout as the batch of one update: the whole rollout read from SB3's buffer in one copy, its observations (their
images scaled once), actions, old log-probabilities and advantages, and the sub-samples drawn from it.

This module uses nothing else of ``sb3_trpo_plus``.
"""

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, PyTorchObs, RolloutBufferSamples

#: The buffer classes read directly, and how their samples are built (any other class goes through its own ``get``)
_SAMPLES: dict[type[RolloutBuffer], Callable[..., RolloutBufferSamples | DictRolloutBufferSamples]] = {
    RolloutBuffer: RolloutBufferSamples,
    DictRolloutBuffer: DictRolloutBufferSamples,
}


def is_channels_first_image(space: spaces.Space) -> bool:
    """
    Whether observations of ``space`` are images in SB3's sense (``is_image_space``: a ``uint8`` Box of 3 dimensions)
    with the channels first, as ``VecTransposeImage`` makes them: the observations that SB3's CNNs take as they are.
    Other 3-dimensional observations (MinAtar's boolean height x width x channels frames) are not.
    """
    return is_image_space(space, check_channels=False) and is_image_space_channels_first(space)  # type: ignore[arg-type]


def scaled_images(observations: th.Tensor, in_place: bool = False) -> th.Tensor:
    """
    ``uint8`` images scaled to ``[0, 1]``: ``preprocess_obs``'s ``obs.float() / 255.0``, bit for bit, with the
    division done in place on the ``float32`` copy (on 2048 Atari frames, one 230 MB allocation fewer). The memory
    format (``channels_last``) is kept.

    :param observations: the images
    :param in_place: when they are ``float32`` already (as SB3's rollout buffers store them), divide these very
        tensors, without any copy: only for a tensor the caller owns (see :func:`owns_copies`)
    :return: the scaled images (``observations`` itself with ``in_place``, else a new ``float32`` tensor)
    """
    if in_place and observations.dtype == th.float32:
        return observations.div_(255.0)
    return observations.to(th.float32, copy=True).div_(255.0)


def flattened(array: np.ndarray, device: th.device | str, channels_last: bool = False) -> th.Tensor:
    """
    A buffer array of shape ``(n_steps, n_envs, *shape)`` as a tensor of shape ``(n_envs * n_steps, *shape)``, env by
    env (``BaseBuffer.swap_and_flatten``'s order), in one copy.

    :param array: the buffer array
    :param device: where the tensor goes
    :param channels_last: write a batch of channels-first images (``shape`` of length 3) in ``channels_last``, the
        memory format of TRPOPlus's convolution weights
    :return: the flattened tensor
    """
    source = th.as_tensor(array, device=device)
    n_steps, n_envs, *shape = source.shape
    memory_format = th.channels_last if channels_last and len(shape) == 3 else th.contiguous_format
    out = th.empty((n_envs * n_steps, *shape), dtype=source.dtype, device=source.device, memory_format=memory_format)
    out.view(n_envs, n_steps, *shape).copy_(source.transpose(0, 1))
    return out


def whole_rollout(buffer: RolloutBuffer) -> RolloutBufferSamples | DictRolloutBufferSamples:
    """
    The whole rollout as one batch: what ``next(buffer.get(batch_size=None))`` returns, without its shuffle.

    ``get`` flattens every array, gathers it in a random order and copies it into a tensor: on 2048 Atari frames
    (230 MB of ``float32`` observations) three passes over the observations, and a fourth where the update wants them
    in ``channels_last``. A trust-region update takes means over the whole batch, whose order does not change them,
    and draws its own random sub-samples; here every array is copied once (channels-first images, see
    :func:`is_channels_first_image`, in ``channels_last``), and the buffer is left as it is. A buffer
    already flattened by ``get``, or of another class (which may sample in its own way), goes through ``get``.

    :param buffer: a full rollout buffer
    :return: the samples, env by env
    """
    samples = _SAMPLES.get(type(buffer))
    if samples is None or buffer.generator_ready:
        return next(buffer.get(batch_size=None))
    device = buffer.device
    observations = buffer.observations
    per_step = (buffer.values, buffer.log_probs, buffer.advantages, buffer.returns)
    space = buffer.observation_space
    return samples(
        {
            key: flattened(value, device, is_channels_first_image(space[key]))  # type: ignore[index]
            for key, value in observations.items()
        }
        if isinstance(observations, dict)
        else flattened(observations, device, is_channels_first_image(space)),
        flattened(buffer.actions.astype(np.float32, copy=False), device),
        *(flattened(array, device).flatten() for array in per_step),
    )


def owns_copies(buffer: RolloutBuffer) -> bool:
    """
    Whether the tensors that :func:`whole_rollout` returns for ``buffer`` are new copies, which the caller may change
    in place without touching the buffer: for the classes it reads directly (its own copies; and SB3's ``get``, once
    the buffer is flattened, copies too). Another class's ``get`` may return views of its storage.
    """
    return type(buffer) in _SAMPLES


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
    scaling here is ``preprocess_obs``'s own arithmetic (:func:`scaled_images`), so the update
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
