"""The workers' gradient exchange (training/distributed.py): gloo's ``all_gather`` against the
shared memory that workers on one machine use.

    python benchmarks/bench_exchange.py [--workers 2] [--rounds 1000] [--repeats 5]

``--workers`` processes join a gloo process group as ``train.py --workers N`` starts them, one
torch thread each, and each registers ``WorkerGroup.average_gradients`` on its copy of the
default policy's parameters (``training.config.make_policy``), once with the shared memory
and once without. Each round every worker makes a backward pass of a sum whose gradients
are known, and the hook averages them over the workers: the time per round is that pass, the
exchange and the averaging, with nothing else to wait for, so the least a training run pays
per minibatch (16 times a rollout with the default settings). Figures are worker 0's medians over
``--repeats`` repeats, the two ways one after the other in each, and the ratio is taken
within each repeat.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

import torch as th
import torch.distributed as dist
import torch.multiprocessing as mp

from training.config import TrainConfig, make_policy, resolve
from training.distributed import COLLECTIVE_TIMEOUT, MAX_LOCAL_WORKERS, WorkerGroup


def seconds_per_round(group: WorkerGroup, shared_memory: bool, rounds: int) -> float:
    """Seconds per exchange of the default policy's gradients, ``shared_memory`` or gloo."""
    parameters = [p for p in make_policy(resolve(TrainConfig())).parameters() if p.requires_grad]
    if group.average_gradients(parameters, shared_memory=shared_memory) != shared_memory:
        raise SystemExit("the workers cannot share memory here (training/distributed.py says when)")
    weights = [th.full_like(p, float(group.rank + 1)) for p in parameters]

    def one() -> None:  # a backward pass: the gradients are the weights, then averaged
        for parameter in parameters:
            parameter.grad = None
        sum((p * w).sum() for p, w in zip(parameters, weights, strict=True)).backward()

    for _ in range(rounds // 10):
        one()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        one()
    return (time.perf_counter() - start) / rounds


def worker(rank: int, size: int, port: int, rounds: int, repeats: int) -> None:
    th.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, size, is_master=rank == 0, timeout=COLLECTIVE_TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
    group = WorkerGroup(rank, size)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for shared_memory in (False, True):
            times[shared_memory].append(seconds_per_round(group, shared_memory, rounds))
    parameters = sum(p.numel() for p in make_policy(resolve(TrainConfig())).parameters())
    group.close()
    if rank == 0:
        gloo, shared = (statistics.median(times[way]) for way in (False, True))
        ratios = [s / g for s, g in zip(times[True], times[False], strict=True)]
        print(
            f"averaging {parameters:,} gradients over {size} workers, median of {repeats} "
            f"repeats of {rounds:,} rounds"
        )
        print(f"  gloo all_gather   {1e6 * gloo:8.0f} us")
        print(f"  shared memory     {1e6 * shared:8.0f} us")
        print(
            f"shared memory / gloo: {statistics.median(ratios):.3f} (per repeat: "
            + ", ".join(f"{r:.3f}" for r in ratios)
            + ")"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--rounds", type=int, default=1000, help="exchanges per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (default 5)")
    args = parser.parse_args()
    if not 2 <= args.workers <= MAX_LOCAL_WORKERS:
        parser.error(f"--workers must be from 2 to {MAX_LOCAL_WORKERS}, got {args.workers}")
    if args.rounds < 10 or args.repeats < 1:
        parser.error("--rounds must be >= 10 and --repeats >= 1")
    mp.spawn(
        worker, args=(args.workers, free_port(), args.rounds, args.repeats), nprocs=args.workers
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    main()
