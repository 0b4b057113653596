"""Tests of ``sb3_trpo_plus.jvp``: hand-written tangent rules and fallback against ``torch.func.jvp``."""

from collections.abc import Mapping
from typing import cast

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import FlattenExtractor, NatureCNN
from torch import nn
from torch.func import functional_call

from sb3_trpo_plus.jvp import Linearization, is_fast_path, linearize

th.set_num_threads(1)

RTOL = 1e-5


@pytest.fixture(autouse=True)
def _seed() -> None:
    th.manual_seed(0)


def reference_jvp(
    module: nn.Module, x: th.Tensor, tangents: Mapping[nn.Parameter, th.Tensor], dx: th.Tensor | None
) -> tuple[th.Tensor, th.Tensor]:
    """Output and tangent computed by ``torch.func.jvp`` over every parameter and the input."""
    params = dict(module.named_parameters())
    names = list(params)
    primals = tuple(p.detach() for p in params.values())
    param_tangents = tuple(tangents.get(p, th.zeros_like(p)) for p in params.values())

    def func(inp: th.Tensor, *flat: th.Tensor) -> th.Tensor:
        return functional_call(module, dict(zip(names, flat, strict=True)), (inp,))

    with th.no_grad():
        result = th.func.jvp(func, (x, *primals), (th.zeros_like(x) if dx is None else dx, *param_tangents))
    return result[0], result[1]


def random_tangents(module: nn.Module) -> dict[nn.Parameter, th.Tensor]:
    return {p: th.randn_like(p) for p in module.parameters()}


def assert_close(actual: th.Tensor, expected: th.Tensor, rtol: float = RTOL) -> None:
    assert actual.shape == expected.shape
    scale = expected.abs().max().item()
    err = (actual - expected).abs().max().item()
    assert err <= rtol * max(scale, 1e-12), f"max abs error {err:.3g} for max abs value {scale:.3g}"


def check_module(module: nn.Module, x: th.Tensor, with_input_tangent: bool = True) -> Linearization:
    """Full tangents (+ input tangent): output and tangent agree with the reference; returns the linearization."""
    tangents = random_tangents(module)
    dx = th.randn_like(x) if with_input_tangent else None
    lin = linearize(module, x)
    with th.no_grad():
        assert th.equal(lin.output, module(x))
    y_ref, dy_ref = reference_jvp(module, x, tangents, dx)
    assert_close(lin.output, y_ref)
    assert_close(lin.jvp(tangents, dx), dy_ref)
    # Repeatable, and the linearization can be reused with other tangents.
    assert_close(lin.jvp(tangents, dx), dy_ref)
    other = random_tangents(module)
    assert_close(lin.jvp(other, dx), reference_jvp(module, x, other, dx)[1])
    return lin


ACTIVATIONS = [
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.ELU,
    lambda: nn.ELU(alpha=0.5),
    nn.LeakyReLU,
    lambda: nn.LeakyReLU(0.2),
    nn.SiLU,
    nn.Identity,
]


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_mlp_each_activation(activation) -> None:
    mlp = nn.Sequential(nn.Linear(5, 16), activation(), nn.Linear(16, 16), activation(), nn.Linear(16, 3))
    assert is_fast_path(mlp)
    x = th.randn(7, 5)
    check_module(mlp, x)
    check_module(mlp, x, with_input_tangent=False)


@pytest.mark.parametrize(
    "activation",
    [
        lambda: nn.ReLU(inplace=True),
        lambda: nn.LeakyReLU(0.1, inplace=True),
        lambda: nn.ELU(inplace=True),
        lambda: nn.SiLU(inplace=True),
    ],
)
def test_inplace_activations(activation) -> None:
    mlp = nn.Sequential(nn.Linear(4, 8), activation(), nn.Linear(8, 2))
    assert is_fast_path(mlp)
    check_module(mlp, th.randn(6, 4))


def test_input_tangent_not_modified() -> None:
    # The first rule (an activation) must not scale the caller's tangent in place.
    mlp = nn.Sequential(nn.ReLU(), nn.Flatten(), nn.Tanh(), nn.Linear(6, 2))
    x = th.randn(4, 2, 3)
    dx = th.randn_like(x)
    dx_copy = dx.clone()
    lin = linearize(mlp, x)
    d_out = lin.jvp({}, dx)
    assert th.equal(dx, dx_copy)
    assert_close(d_out, reference_jvp(mlp, x, {}, dx)[1])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(kernel_size=3),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=2),
        dict(kernel_size=3, padding="same"),
        dict(kernel_size=3, groups=2),
        dict(kernel_size=2, bias=False),
    ],
)
def test_conv2d(kwargs) -> None:
    conv = nn.Conv2d(4, 6, **kwargs)
    assert is_fast_path(conv)
    x = th.randn(3, 4, 9, 10)
    check_module(conv, x)
    check_module(conv, x, with_input_tangent=False)


def test_conv_padding_mode_falls_back() -> None:
    conv = nn.Conv2d(2, 3, kernel_size=3, padding=1, padding_mode="reflect")
    assert not is_fast_path(conv)
    check_module(conv, th.randn(2, 2, 6, 6))


def test_conv1d_conv3d_unflatten() -> None:
    net1 = nn.Sequential(nn.Conv1d(3, 4, kernel_size=3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4, 2))
    net3 = nn.Sequential(nn.Unflatten(1, (2, 3)), nn.Conv3d(2, 2, kernel_size=2), nn.Tanh(), nn.Flatten())
    assert is_fast_path(net1) and is_fast_path(net3)
    check_module(net1, th.randn(3, 3, 9))
    check_module(net3, th.randn(2, 6, 4, 4))


def test_nature_cnn() -> None:
    space = spaces.Box(0, 255, (4, 36, 36), dtype=np.uint8)
    cnn = NatureCNN(space, features_dim=32)
    assert is_fast_path(cnn)
    x = th.rand(3, 4, 36, 36)
    lin = check_module(cnn, x, with_input_tangent=False)
    assert lin.output.shape == (3, 32)
    check_module(cnn, x)


def test_flatten_extractor() -> None:
    extractor = FlattenExtractor(spaces.Box(-1, 1, (2, 3)))
    assert is_fast_path(extractor)
    x = th.randn(4, 2, 3)
    lin = linearize(extractor, x)
    assert th.equal(lin.output, x.flatten(1))
    dx = th.randn_like(x)
    assert th.equal(lin.jvp({}, dx), dx.flatten(1))
    assert th.equal(lin.jvp({}), th.zeros(4, 6))


def test_partial_tangents() -> None:
    mlp = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = th.randn(5, 3)
    lin = linearize(mlp, x)
    params = list(mlp.parameters())
    subsets = [
        {params[0]: th.randn_like(params[0])},  # first weight only
        {params[1]: th.randn_like(params[1])},  # first bias only: broadcast bias tangent
        {params[5]: th.randn_like(params[5])},  # last bias only: no other term
        {p: th.randn_like(p) for p in params[2:4]},  # a middle layer
    ]
    for subset in subsets:
        assert_close(lin.jvp(subset), reference_jvp(mlp, x, subset, None)[1])
    dx = th.randn_like(x)
    assert_close(lin.jvp({}, dx), reference_jvp(mlp, x, {}, dx)[1])
    zero = lin.jvp({})
    assert th.equal(zero, th.zeros(5, 2))
    # Tangents of foreign parameters are ignored.
    assert th.equal(lin.jvp({nn.Parameter(th.ones(2)): th.ones(2)}), zero)


def test_bias_only_output_is_writable() -> None:
    layer = nn.Linear(3, 4)
    lin = linearize(layer, th.randn(5, 3))
    d_out = lin.jvp({cast(nn.Parameter, layer.bias): th.arange(4.0)})
    assert d_out.shape == (5, 4) and d_out.is_contiguous()
    assert th.equal(d_out, th.arange(4.0).expand(5, 4))
    d_out.add_(1.0)


class Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(th.randn(4))
        self.inner = nn.Linear(4, 4)

    def forward(self, x: th.Tensor) -> th.Tensor:
        return th.sin(self.inner(x) * self.scale) + x


class MyLinear(nn.Linear):
    def forward(self, x: th.Tensor) -> th.Tensor:
        return super().forward(x) ** 2


def test_fallback_custom_module() -> None:
    custom = Custom()
    assert not is_fast_path(custom)
    check_module(custom, th.randn(3, 4))
    check_module(custom, th.randn(3, 4), with_input_tangent=False)


def test_fallback_inside_sequential() -> None:
    net = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), Custom(), nn.GELU(), MyLinear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    assert not is_fast_path(net)
    assert is_fast_path(net[0]) and not is_fast_path(net[2]) and not is_fast_path(net[3]) and not is_fast_path(net[4])
    x = th.randn(5, 2)
    check_module(net, x)
    lin = linearize(net, x)
    only_custom = {p: th.randn_like(p) for p in net[2].parameters()}
    assert_close(lin.jvp(only_custom), reference_jvp(net, x, only_custom, None)[1])


def test_subclass_and_hooks_fall_back() -> None:
    sub = MyLinear(3, 2)
    assert not is_fast_path(sub)
    check_module(sub, th.randn(4, 3))

    hooked = nn.Linear(3, 2)
    handle = hooked.register_forward_hook(lambda module, inputs, output: output * 2)
    assert not is_fast_path(hooked)
    assert not is_fast_path(nn.Sequential(hooked))
    check_module(hooked, th.randn(4, 3))
    handle.remove()
    assert is_fast_path(hooked)

    seq = nn.Sequential(nn.Linear(3, 2))
    seq.register_forward_pre_hook(lambda module, inputs: (inputs[0] + 1,))
    assert not is_fast_path(seq)
    check_module(seq, th.randn(4, 3))


def test_fallback_batchnorm_train_keeps_buffers() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
    net.train()
    x = th.randn(8, 3, dtype=th.float64)
    lin = linearize(net, x)  # one forward pass: updates the running statistics once, like net(x)
    batch_norm = net[1]
    assert isinstance(batch_norm, nn.BatchNorm1d)
    assert batch_norm.running_mean is not None and batch_norm.num_batches_tracked is not None
    running_mean = batch_norm.running_mean.clone()
    tangents = random_tangents(net)
    d_out = lin.jvp(tangents)
    d_out2 = lin.jvp(tangents)
    assert th.equal(batch_norm.running_mean, running_mean) and batch_norm.num_batches_tracked.item() == 1
    assert th.equal(d_out, d_out2)
    # Central finite difference (torch.func.jvp refuses the in-place buffer update).
    eps = 1e-6
    params = dict(net.named_parameters())

    def shifted(sign: float) -> th.Tensor:
        values = {name: p.detach() + sign * eps * tangents[p] for name, p in params.items()}
        buffers = {name: b.clone() for name, b in net.named_buffers()}
        return functional_call(net, {**values, **buffers}, (x,))

    with th.no_grad():
        finite_diff = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    assert_close(d_out, finite_diff, rtol=1e-6)


def test_no_graph_and_input_mutation_detected() -> None:
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = th.randn(5, 3, requires_grad=True)
    lin = linearize(mlp, x)
    tangents = random_tangents(mlp)
    assert not lin.output.requires_grad and lin.output.grad_fn is None
    d_out = lin.jvp(tangents)
    assert not d_out.requires_grad and d_out.grad_fn is None

    y = th.randn(5, 3)
    lin = linearize(mlp, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        lin.jvp(tangents)
    lin.jvp({}, th.randn(5, 3))  # the cached input is not needed without weight tangents

    custom_input = th.randn(2, 4)
    lin = linearize(Custom(), custom_input)
    custom_input.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        lin.jvp({}, th.randn(2, 4))


def test_shape_checks_and_non_tensor_output() -> None:
    layer = nn.Linear(3, 2)
    lin = linearize(layer, th.randn(4, 3))
    with pytest.raises(ValueError):
        lin.jvp({cast(nn.Parameter, layer.weight): th.randn(3, 2)})
    with pytest.raises(ValueError):
        lin.jvp({}, th.randn(4, 2))

    class Pair(nn.Module):
        def forward(self, x: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
            return x, x

    with pytest.raises(TypeError):
        linearize(Pair(), th.randn(2))
