"""The network's first layer: a dense product over every input, or sums over the active ones.

    python benchmarks/bench_network.py [--batch 1024] [--hidden 128] [--repeats 7]

Each afterstate view has 245 inputs, of which at most 11 are 1 and the rest 0, so the first
layer of ``buttonup_env.learn.nets.RingPolicy`` multiplies mostly zeros. This measures one forward
and backward pass of that layer (ReLU after it, a sum as the loss) on the views of ``--batch``
positions (three views each) drawn from random play in the batched env, one torch thread, in
four forms: ``nn.Linear`` in float32; the same under bfloat16 autocast (as ``--bfloat16``
trains); ``nn.EmbeddingBag`` summing the weight rows of the active inputs (the indices padded to
11 with a zero row); the same sum with plain indexing; and
``buttonup_env.learn.active.active_linear``, the numba kernels training uses (``--active-features``,
the default), given the lists of active features as ``TensorRolloutBuffer`` makes them once a
rollout. Medians of ``--repeats`` rounds of 10 passes each, and each form's time over the dense
float32 one's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch as th

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.game.encoding import MAX_LEGAL
from buttonup_env.learn.active import active_features, active_linear

ACTIVE = 11
"""The most inputs of a view that are 1 at once."""


def views(batch: int) -> np.ndarray:
    """The afterstate views of ``batch`` positions of random play, one row per view."""
    env = ButtonUpVectorEnv(batch, encoding="afterstates", episode="round")
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3):  # a few moves in, so that stacks have grown
        actions = (info["action_mask"] * rng.random(info["action_mask"].shape)).argmax(axis=1)
        obs, _, _, _, info = env.step(actions)
    return obs.reshape(batch * MAX_LEGAL, -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024, help="positions (x3 views)")
    parser.add_argument("--hidden", type=int, default=128, help="units of the first layer")
    parser.add_argument("--repeats", type=int, default=7, help="rounds (medians are reported)")
    args = parser.parse_args()
    if min(args.batch, args.hidden, args.repeats) < 1:
        parser.error("--batch, --hidden and --repeats must be >= 1")
    th.set_num_threads(1)
    x = th.tensor(views(args.batch))
    n, size = x.shape
    assert int((x != 0).sum(dim=1).max()) <= ACTIVE
    index = th.full((n, ACTIVE), size, dtype=th.long)  # the padding row: zeros
    for row in range(n):
        active = th.nonzero(x[row]).flatten()
        index[row, : len(active)] = active
    linear = th.nn.Linear(size, args.hidden)
    bag = th.nn.EmbeddingBag(size + 1, args.hidden, mode="sum", padding_idx=size)
    weight = th.nn.Parameter(th.randn(size + 1, args.hidden) * 0.01)
    bias = th.nn.Parameter(th.zeros(args.hidden))

    def dense() -> None:
        linear(x).relu().sum().backward()

    def dense_bf16() -> None:
        with th.autocast("cpu", dtype=th.bfloat16):
            out = linear(x).relu()
        out.float().sum().backward()

    def embedding_bag() -> None:
        (bag(index) + bias).relu().sum().backward()

    def indexing() -> None:
        (weight[index].sum(dim=1) + bias).relu().sum().backward()

    lists = th.as_tensor(active_features(x.numpy(), size))

    def kernels() -> None:
        active_linear(lists, linear).relu().sum().backward()

    forms: dict[str, Callable[[], None]] = {
        "nn.Linear, float32": dense,
        "nn.Linear, bfloat16 autocast": dense_bf16,
        "nn.EmbeddingBag over active inputs": embedding_bag,
        "indexing and sum over active inputs": indexing,
        "active_linear (numba) over active inputs": kernels,
    }
    for form in forms.values():
        for _ in range(3):
            form()
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.repeats):
        for name, form in forms.items():
            start = time.perf_counter()
            for _ in range(10):
                form()
            times[name].append((time.perf_counter() - start) / 10 * 1000)
    base = statistics.median(times["nn.Linear, float32"])
    print(
        f"first layer, forward and backward: {n:,} views x {size} inputs -> {args.hidden} "
        f"units, one thread, median of {args.repeats} rounds of 10"
    )
    for name in forms:
        ms = statistics.median(times[name])
        print(f"  {name:40s} {ms:7.2f} ms   {ms / base:5.2f} x the dense float32 time")


if __name__ == "__main__":
    main()
