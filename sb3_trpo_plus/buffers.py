"""
The rollout as one batch, for an update that takes means over all of it.

This module uses nothing else of ``sb3_trpo_plus``.
"""

from collections.abc import Callable

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, RolloutBufferSamples

#: The buffer classes read directly, and how their samples are built (any other class goes through its own ``get``)
_SAMPLES: dict[type[RolloutBuffer], Callable[..., RolloutBufferSamples | DictRolloutBufferSamples]] = {
    RolloutBuffer: RolloutBufferSamples,
    DictRolloutBuffer: DictRolloutBufferSamples,
}


def flattened(array: np.ndarray, device: th.device | str) -> th.Tensor:
    """
    A buffer array of shape ``(n_steps, n_envs, *shape)`` as a tensor of shape ``(n_envs * n_steps, *shape)``, env by
    env (``BaseBuffer.swap_and_flatten``'s order), in one copy. A batch of images (``shape`` of length 3) comes out in
    ``channels_last``, the memory format of TRPOPlus's convolution weights.

    :param array: the buffer array
    :param device: where the tensor goes
    :return: the flattened tensor
    """
    source = th.as_tensor(array, device=device)
    n_steps, n_envs, *shape = source.shape
    memory_format = th.channels_last if len(shape) == 3 else th.contiguous_format
    out = th.empty((n_envs * n_steps, *shape), dtype=source.dtype, device=source.device, memory_format=memory_format)
    out.view(n_envs, n_steps, *shape).copy_(source.transpose(0, 1))
    return out


def whole_rollout(buffer: RolloutBuffer) -> RolloutBufferSamples | DictRolloutBufferSamples:
    """
    The whole rollout as one batch: what ``next(buffer.get(batch_size=None))`` returns, without its shuffle.

    ``get`` flattens every array, gathers it in a random order and copies it into a tensor: on 2048 Atari frames
    (230 MB of ``float32`` observations) three passes over the observations, and a fourth where the update wants them
    in ``channels_last``. A trust-region update takes means over the whole batch, whose order does not change them,
    and draws its own random sub-samples; here every array is copied once, and the buffer is left as it is. A buffer
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
    return samples(
        {key: flattened(value, device) for key, value in observations.items()}
        if isinstance(observations, dict)
        else flattened(observations, device),
        flattened(buffer.actions.astype(np.float32, copy=False), device),
        *(flattened(array, device).flatten() for array in per_step),
    )
