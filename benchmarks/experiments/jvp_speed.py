"""
Time ``torch.func.jvp`` against ``sb3_trpo_plus.jvp.Linearization.jvp`` for NatureCNN on Atari-sized frames.

The tangent is taken with respect to all parameters (no input tangent), as in TRPO's Fisher-vector product.

Usage::

    python -m benchmarks.experiments.jvp_speed --batch 512 --repeats 5 --threads 1
"""

import argparse

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import NatureCNN
from torch.func import functional_call

from benchmarks._timing import best_time
from sb3_trpo_plus.jvp import linearize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=512, help="number of 4x84x84 frames")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per method (best is reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    th.set_num_threads(args.threads)
    th.manual_seed(args.seed)
    cnn = NatureCNN(spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8))
    x = th.rand(args.batch, 4, 84, 84)
    tangents = {p: th.randn_like(p) for p in cnn.parameters()}
    names = [name for name, _ in cnn.named_parameters()]
    primals = tuple(p.detach() for p in cnn.parameters())
    tangent_tuple = tuple(tangents[p] for p in cnn.parameters())

    def func(*params: th.Tensor) -> th.Tensor:
        return functional_call(cnn, dict(zip(names, params, strict=True)), (x,))

    def reference() -> th.Tensor:
        with th.no_grad():
            return th.func.jvp(func, primals, tangent_tuple)[1]

    def forward() -> th.Tensor:
        with th.no_grad():
            return cnn(x)

    lin = linearize(cnn, x)
    expected = reference()
    actual = lin.jvp(tangents)
    rel_err = ((actual - expected).abs().max() / expected.abs().max()).item()

    t_forward = 1000.0 * best_time(forward, args.repeats)
    t_reference = 1000.0 * best_time(reference, args.repeats)
    t_linearize = 1000.0 * best_time(lambda: linearize(cnn, x), args.repeats)
    t_jvp = 1000.0 * best_time(lambda: lin.jvp(tangents), args.repeats)

    print(f"NatureCNN, batch {args.batch} x 4x84x84, {args.threads} thread(s), best of {args.repeats}")
    print(f"  forward (no grad)            {t_forward:9.1f} ms")
    print(f"  torch.func.jvp (fwd+tangent) {t_reference:9.1f} ms")
    print(f"  linearize (once)             {t_linearize:9.1f} ms")
    print(f"  Linearization.jvp (per call) {t_jvp:9.1f} ms   speed-up {t_reference / t_jvp:.2f}x per call")
    print(f"  max relative error           {rel_err:9.2e}   (max |diff| / max |reference|)")


if __name__ == "__main__":
    main()
