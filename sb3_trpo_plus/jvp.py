"""
Forward-mode linearization of a network with respect to its parameters.

TRPO's Fisher-vector product ``F v = J^T M J v`` needs the Jacobian-vector product ``J v`` of the
policy network's output with respect to its parameters. ``torch.func.jvp`` and
``torch.autograd.forward_ad`` compute it for any module, but on CPU they are several times slower
than a plain forward pass for convolutions. This module linearizes a network once
(:func:`linearize` runs the primal forward pass and caches what the tangent rules need: each
affine layer's input and each activation's derivative) and then evaluates tangents cheaply and
repeatedly (:meth:`Linearization.jvp`) with hand-written rules for standard layers:

- containers: ``nn.Sequential`` and the Stable-Baselines3 extractors ``NatureCNN`` and ``FlattenExtractor``,
- affine layers: ``nn.Linear``, ``nn.Conv1d``, ``nn.Conv2d``, ``nn.Conv3d`` (``padding_mode="zeros"`` only),
  ``dy = layer(dx; W) + layer(x; dW) + db``, skipping the terms whose tangent is zero
  (so the first layer of a network, whose input has no tangent, costs one convolution, not two),
- element-wise activations: ``nn.ReLU``, ``nn.LeakyReLU``, ``nn.ELU``, ``nn.Tanh``, ``nn.Sigmoid``, ``nn.SiLU``,
- shape layers: ``nn.Flatten``, ``nn.Unflatten``, ``nn.Identity``.

Rules are looked up by exact type, so a subclass (which may override ``forward``), a module
with an instance-level ``forward`` or with forward (pre-)hooks, and any other module fall back
to forward-mode automatic differentiation (``torch.autograd.forward_ad`` over
``torch.func.functional_call``), which is correct for any differentiable module but re-runs the
module's forward pass at each call. The fallback works on copies of the module's buffers, so
that, e.g., a ``BatchNorm`` in training mode does not update its running statistics once per call.

Contract: the linearization is taken at the parameter values and the input given to
:func:`linearize`. Neither may be modified in place before the last call to
:meth:`Linearization.jvp` (linearize again after a parameter update). In-place modifications
of a cached input are detected and raise a ``RuntimeError``; parameters are read live and are
not checked.

Example::

    lin = linearize(policy_net, obs)
    tangents = {p: v for p, v in zip(policy_net.parameters(), direction)}
    d_out = lin.jvp(tangents)  # J v, shape of lin.output
"""

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

import torch as th
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from stable_baselines3.common.torch_layers import FlattenExtractor, NatureCNN
from torch import nn
from torch.func import functional_call
from torch.nn.modules import module as _module_impl

__all__ = ["Linearization", "is_fast_path", "linearize"]

ParamTangents = Mapping[nn.Parameter, th.Tensor]
# A node returns (tangent or None for an identically zero tangent, whether the tangent is owned:
# a fresh tensor that no caller holds, which the next rule may modify in place).
_TangentResult = tuple[th.Tensor | None, bool]


def _check_unchanged(tensor: th.Tensor, version: int, where: str) -> None:
    """
    Raise if a tensor cached by a linearization was modified in place since it was cached.

    :param tensor: the cached tensor
    :param version: its version counter when it was cached
    :param where: the layer that cached it, for the error message
    """
    if tensor._version != version:
        raise RuntimeError(
            f"The input of {where} was modified in place after linearize() cached it: "
            "the linearization is no longer valid, call linearize() again."
        )


class _Node(ABC):
    """One linearized module: maps tangents of its input and parameters to the tangent of its output."""

    @abstractmethod
    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        """
        Tangent of the module's output.

        :param param_tangents: tangents of (some of) the parameters, keyed by parameter
        :param dx: tangent of the module's input, ``None`` for zero
        :param owned: whether ``dx`` may be modified in place
        :return: the output tangent (``None`` for zero) and whether it is owned
        """


class _ChainNode(_Node):
    """Composition ``f_n o ... o f_1`` (``nn.Sequential`` and Stable-Baselines3 extractors)."""

    def __init__(self, nodes: Sequence[_Node]) -> None:
        self.nodes = list(nodes)

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        for node in self.nodes:
            dx, owned = node.tangent(param_tangents, dx, owned)
        return dx, owned


class _IdentityNode(_Node):
    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        return dx, owned


class _FlattenNode(_Node):
    def __init__(self, start_dim: int, end_dim: int) -> None:
        self.start_dim = start_dim
        self.end_dim = end_dim

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        if dx is None:
            return None, False
        # A view of an owned tensor is still owned: nobody else holds the storage.
        return dx.flatten(self.start_dim, self.end_dim), owned


class _UnflattenNode(_Node):
    def __init__(self, dim: int, sizes: Sequence[int]) -> None:
        self.dim = dim
        self.sizes = tuple(sizes)

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        if dx is None:
            return None, False
        return dx.unflatten(self.dim, self.sizes), owned


class _ScaleNode(_Node):
    """Element-wise activation: ``dy = f'(x) * dx``, with ``f'(x)`` cached (a 0/1 mask for ReLU)."""

    def __init__(self, derivative: th.Tensor) -> None:
        self.derivative = derivative

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        if dx is None:
            return None, False
        if owned:
            return dx.mul_(self.derivative), True
        return dx * self.derivative, True


class _AffineNode(_Node):
    """
    ``y = op(x, W, b)`` with ``op`` linear in ``x`` and in ``W`` (linear layer or convolution).

    :param module: the layer (its ``weight`` and ``bias`` are read at each call)
    :param x: the layer's input at the linearization point
    :param op: ``op(input, weight, bias)``, the layer's functional form
    :param bias_shape: shape to which the bias tangent is viewed to broadcast against the output
    :param output_shape: shape of the layer's output
    """

    def __init__(
        self,
        module: nn.Module,
        x: th.Tensor,
        op: Callable[[th.Tensor, th.Tensor, th.Tensor | None], th.Tensor],
        bias_shape: tuple[int, ...],
        output_shape: th.Size,
    ) -> None:
        self.module = module
        self.x = x
        self.x_version = x._version
        self.op = op
        self.bias_shape = bias_shape
        self.output_shape = output_shape

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        weight: nn.Parameter = self.module.weight  # type: ignore[assignment]
        bias: nn.Parameter | None = self.module.bias  # type: ignore[assignment]
        d_weight = param_tangents.get(weight)
        d_bias = param_tangents.get(bias) if bias is not None else None
        if d_weight is not None and d_weight.shape != weight.shape:
            raise ValueError(f"Tangent of shape {tuple(d_weight.shape)} for a weight of shape {tuple(weight.shape)}")
        if d_bias is not None and bias is not None and d_bias.shape != bias.shape:
            raise ValueError(f"Tangent of shape {tuple(d_bias.shape)} for a bias of shape {tuple(bias.shape)}")

        out: th.Tensor | None = None
        if d_weight is not None:
            _check_unchanged(self.x, self.x_version, type(self.module).__name__)
            # The bias tangent rides along as the bias of this call.
            out = self.op(self.x, d_weight, d_bias)
            d_bias = None
        if dx is not None:
            term = self.op(dx, weight, None)
            out = term if out is None else out.add_(term)
        if d_bias is not None:
            d_bias = d_bias.view(self.bias_shape)
            out = d_bias.expand(self.output_shape).contiguous() if out is None else out.add_(d_bias)
        return out, out is not None


class _FallbackNode(_Node):
    """Any module: forward-mode AD over ``torch.func.functional_call``, re-running the forward pass."""

    def __init__(self, module: nn.Module, x: th.Tensor) -> None:
        self.module = module
        self.x = x
        self.x_version = x._version
        # named_parameters() removes duplicates: a tied parameter is passed once, under one name,
        # and functional_call (tie_weights=True) substitutes it everywhere.
        self.names = {param: name for name, param in module.named_parameters()}

    def tangent(self, param_tangents: ParamTangents, dx: th.Tensor | None, owned: bool) -> _TangentResult:
        active = [(name, param, param_tangents[param]) for param, name in self.names.items() if param in param_tangents]
        if not active and dx is None:
            return None, False
        _check_unchanged(self.x, self.x_version, type(self.module).__name__)
        # Copies of the buffers: in-place updates (e.g. BatchNorm running statistics) stay out of the module.
        buffers = {name: buf.clone() for name, buf in self.module.named_buffers()}
        with fwAD.dual_level():
            params = {name: fwAD.make_dual(param.detach(), d_param) for name, param, d_param in active}
            x = self.x if dx is None else fwAD.make_dual(self.x, dx)
            y = functional_call(self.module, {**buffers, **params}, (x,))
            if not isinstance(y, th.Tensor):
                raise TypeError(f"{type(self.module).__name__} returned {type(y).__name__}, expected a Tensor")
            d_y = fwAD.unpack_dual(y).tangent
        # The tangent may alias dx (e.g. a module that returns its input): never owned.
        return d_y, False


def _leaf_affine(
    module: nn.Module, x: th.Tensor, op: Callable[[th.Tensor, th.Tensor, th.Tensor | None], th.Tensor], n_spatial: int
) -> tuple[_Node, th.Tensor]:
    y = module(x)
    out_channels = int(module.weight.shape[0])  # type: ignore[index]
    return _AffineNode(module, x, op, (out_channels,) + (1,) * n_spatial, y.shape), y


def _build_linear(module: nn.Linear, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    return _leaf_affine(module, x, F.linear, 0)


_CONV_FUNCTIONS: dict[type[nn.Module], Callable[..., th.Tensor]] = {
    nn.Conv1d: F.conv1d,
    nn.Conv2d: F.conv2d,
    nn.Conv3d: F.conv3d,
}


def _build_conv(module: nn.Conv1d | nn.Conv2d | nn.Conv3d, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    op = functools.partial(
        _CONV_FUNCTIONS[type(module)],
        stride=module.stride,
        padding=module.padding,
        dilation=module.dilation,
        groups=module.groups,
    )
    return _leaf_affine(module, x, op, len(module.kernel_size))


def _build_relu(module: nn.ReLU, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    # Before the forward pass, which may be in place. A 0/1 mask in the input's dtype: multiplying
    # by it is about 4x faster on CPU than by a boolean mask, for 4x the memory.
    mask = (x > 0).to(x.dtype)
    return _ScaleNode(mask), module(x)


def _build_leaky_relu(module: nn.LeakyReLU, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    slope = module.negative_slope
    derivative = (x > 0).to(x.dtype).mul_(1.0 - slope).add_(slope)  # 1 where x > 0, slope elsewhere (as PyTorch)
    return _ScaleNode(derivative), module(x)


def _build_elu(module: nn.ELU, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    derivative = th.where(x > 0, 1.0, x.exp().mul_(module.alpha))
    return _ScaleNode(derivative), module(x)


def _build_tanh(module: nn.Tanh, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    y = module(x)
    return _ScaleNode(th.mul(y, y).neg_().add_(1.0)), y


def _build_sigmoid(module: nn.Sigmoid, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    y = module(x)
    return _ScaleNode(th.sub(1.0, y).mul_(y)), y


def _build_silu(module: nn.SiLU, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    sig = th.sigmoid(x)
    derivative = th.sub(1.0, sig).mul_(x).add_(1.0).mul_(sig)  # s * (1 + x * (1 - s))
    return _ScaleNode(derivative), module(x)


def _build_identity(module: nn.Identity, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    return _IdentityNode(), module(x)


def _build_flatten(module: nn.Flatten, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    return _FlattenNode(module.start_dim, module.end_dim), module(x)


def _build_unflatten(module: nn.Unflatten, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    return _UnflattenNode(module.dim, module.unflattened_size), module(x)  # type: ignore[arg-type]


_LeafBuilder = Callable[[nn.Module, th.Tensor], tuple[_Node, th.Tensor]]

# Keyed by exact type: a subclass may override forward() and must fall back.
_LEAF_RULES: dict[type[nn.Module], _LeafBuilder] = {
    nn.Linear: _build_linear,  # type: ignore[dict-item]
    nn.Conv1d: _build_conv,  # type: ignore[dict-item]
    nn.Conv2d: _build_conv,  # type: ignore[dict-item]
    nn.Conv3d: _build_conv,  # type: ignore[dict-item]
    nn.ReLU: _build_relu,  # type: ignore[dict-item]
    nn.LeakyReLU: _build_leaky_relu,  # type: ignore[dict-item]
    nn.ELU: _build_elu,  # type: ignore[dict-item]
    nn.Tanh: _build_tanh,  # type: ignore[dict-item]
    nn.Sigmoid: _build_sigmoid,  # type: ignore[dict-item]
    nn.SiLU: _build_silu,  # type: ignore[dict-item]
    nn.Identity: _build_identity,  # type: ignore[dict-item]
    nn.Flatten: _build_flatten,  # type: ignore[dict-item]
    nn.Unflatten: _build_unflatten,  # type: ignore[dict-item]
}

# Containers whose forward is the composition of the listed children, in order.
_CHAIN_RULES: dict[type[nn.Module], Callable[[nn.Module], list[nn.Module]]] = {
    nn.Sequential: lambda module: list(module),  # type: ignore[call-overload]
    NatureCNN: lambda module: [module.cnn, module.linear],  # type: ignore[list-item]
    FlattenExtractor: lambda module: [module.flatten],  # type: ignore[list-item]
}


def _is_plain(module: nn.Module) -> bool:
    """Whether calling the module runs exactly its class's ``forward`` (no hooks, no instance-level override)."""
    if "forward" in module.__dict__:
        return False
    if module._forward_hooks or module._forward_pre_hooks:
        return False
    global_hooks = (
        getattr(_module_impl, "_global_forward_hooks", None),
        getattr(_module_impl, "_global_forward_pre_hooks", None),
    )
    return not any(global_hooks)


def _chain_children(module: nn.Module) -> list[nn.Module] | None:
    """The children composed by ``module`` if it is a known plain container, else ``None``."""
    rule = _CHAIN_RULES.get(type(module))
    if rule is None or not _is_plain(module):
        return None
    return rule(module)


def _leaf_rule(module: nn.Module) -> _LeafBuilder | None:
    """The hand-written rule of ``module`` if it is a known plain layer, else ``None``."""
    rule = _LEAF_RULES.get(type(module))
    if rule is None or not _is_plain(module):
        return None
    if type(module) in _CONV_FUNCTIONS and module.padding_mode != "zeros":
        return None
    return rule


def is_fast_path(module: nn.Module) -> bool:
    """
    Whether :func:`linearize` handles ``module`` with hand-written rules only, without
    falling back to forward-mode automatic differentiation for any part of it.

    :param module: the module
    :return: ``True`` if the module and every submodule on its forward path has a hand-written rule
    """
    children = _chain_children(module)
    if children is not None:
        return all(is_fast_path(child) for child in children)
    return _leaf_rule(module) is not None


def _build(module: nn.Module, x: th.Tensor) -> tuple[_Node, th.Tensor]:
    """Run ``module`` on ``x`` (primal pass) and return its linearization node and output."""
    children = _chain_children(module)
    if children is not None:
        nodes = []
        for child in children:
            node, x = _build(child, x)
            nodes.append(node)
        return _ChainNode(nodes), x
    rule = _leaf_rule(module)
    if rule is not None:
        return rule(module, x)
    node = _FallbackNode(module, x)
    y = module(x)
    if not isinstance(y, th.Tensor):
        raise TypeError(f"{type(module).__name__} returned {type(y).__name__}, expected a Tensor")
    if x._version != node.x_version:
        raise RuntimeError(
            f"{type(module).__name__} modifies its input in place: it cannot be linearized by the generic fallback."
        )
    return node, y


class Linearization:
    """
    A module linearized at an input: its output and a cheap, repeatable Jacobian-vector product.

    Created by :func:`linearize`. The tangent is with respect to the module's parameters and,
    optionally, its input.

    :param node: the linearized module
    :param output: the primal output
    :param input_shape: shape of the input the module was linearized at
    """

    output: th.Tensor

    def __init__(self, node: _Node, output: th.Tensor, input_shape: th.Size) -> None:
        self._node = node
        self.output = output
        self._input_shape = input_shape

    def jvp(self, param_tangents: ParamTangents, input_tangent: th.Tensor | None = None) -> th.Tensor:
        """
        Jacobian-vector product: the tangent of the output for the given tangents of the
        parameters and of the input. No autograd graph is recorded.

        :param param_tangents: tangents keyed by the module's ``nn.Parameter`` objects themselves,
            each of the parameter's shape; parameters missing from the mapping have zero tangent
            (and cost nothing)
        :param input_tangent: tangent of the input, of the input's shape; ``None`` means zero
        :return: the tangent of the output, of the shape of :attr:`output` (it may be a view of
            ``input_tangent`` when the module is a pure reshape of its input)
        """
        if input_tangent is not None and input_tangent.shape != self._input_shape:
            raise ValueError(
                f"Input tangent of shape {tuple(input_tangent.shape)} for an input of shape {tuple(self._input_shape)}"
            )
        with th.no_grad():
            d_output, _ = self._node.tangent(param_tangents, input_tangent, False)
        if d_output is None:
            return th.zeros_like(self.output)
        return d_output


def linearize(module: nn.Module, x: th.Tensor) -> Linearization:
    """
    Run ``module`` on ``x`` (without recording an autograd graph) and cache what is needed to
    compute Jacobian-vector products at this point: each affine layer's input and each
    activation's derivative for layers with a hand-written rule (see :func:`is_fast_path`),
    the input of any other module, which is then differentiated with forward-mode AD at each call.

    ``x`` and the module's parameters must not be modified in place while the linearization
    is in use.

    :param module: a module mapping one tensor to one tensor
    :param x: its input
    :return: the linearization, whose ``output`` equals ``module(x)``
    """
    x = x.detach()
    with th.no_grad():
        node, output = _build(module, x)
    return Linearization(node, output.detach(), x.shape)
