"""
Parameters as one flat vector: the coordinates in which the trust-region step is computed.

This module uses nothing else of ``sb3_trpo_plus``.
"""

from collections.abc import Sequence

import torch as th
from torch import nn


def flatten_params(params: Sequence[th.Tensor]) -> th.Tensor:
    """
    Concatenate tensors into one flat vector (a copy), in logical (row-major) order whatever their memory format
    (``parameters_to_vector`` needs contiguous parameters, which ``channels_last`` convolution weights are not).

    :param params: the parameters (or gradients)
    :return: flat vector
    """
    return th.cat([param.detach().reshape(-1) for param in params])


def assign_params(params: Sequence[nn.Parameter], vector: th.Tensor) -> None:
    """
    Copy a flat vector into parameters in place, keeping their memory format (inverse of :func:`flatten_params`).

    :param params: the parameters to write
    :param vector: flat vector with as many entries as all ``params`` together
    """
    with th.no_grad():
        for param, chunk in zip(params, unflatten_like(vector, params), strict=True):
            param.copy_(chunk)


def unflatten_like(vector: th.Tensor, params: Sequence[nn.Parameter]) -> list[th.Tensor]:
    """
    Split a flat vector into views shaped like ``params`` (inverse of ``parameters_to_vector``).

    :param vector: flat vector with as many entries as all ``params`` together
    :param params: the parameters giving the shapes
    :return: list of views of ``vector``
    """
    chunks = []
    start = 0
    for param in params:
        numel = param.numel()
        chunks.append(vector[start : start + numel].view_as(param))
        start += numel
    if start != vector.numel():
        raise ValueError(f"vector has {vector.numel()} entries but the parameters have {start}")
    return chunks


def flat_grad(
    outputs: th.Tensor | Sequence[th.Tensor],
    params: Sequence[nn.Parameter],
    grad_outputs: Sequence[th.Tensor] | None = None,
    retain_graph: bool = False,
) -> th.Tensor:
    """
    The gradient (or vector-Jacobian product ``u^T J``) of ``outputs`` with respect to ``params``, as one flat
    vector, with zeros for the parameters the outputs do not depend on (unlike sb3-contrib's ``flat_grad``, which
    drops them and so shifts the coordinates).

    :param outputs: a scalar, or the tensors of a vector-Jacobian product
    :param params: the parameters (the coordinates of the result)
    :param grad_outputs: ``u``, one tensor per output (``None`` for a scalar)
    :param retain_graph: keep the graph for another backward pass
    :return: flat vector with as many entries as all ``params`` together
    """
    grads = th.autograd.grad(outputs, params, grad_outputs=grad_outputs, retain_graph=retain_graph, allow_unused=True)
    return th.cat([(grad if grad is not None else th.zeros_like(param)).reshape(-1) for grad, param in zip(grads, params)])
