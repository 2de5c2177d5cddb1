"""The short experiments behind the early training defaults (docs/experiments.md, "Ten-minute
runs against the perfect bot").

    python training/experiments/sweep.py --minutes 10 --encoding afterstates --gae-lambda 1
    python training/experiments/sweep.py --minutes 10 --encoding ring --gae-lambda 0.95

Trains MaskablePPO + RingPolicy against a fixed opponent mix for a wall-clock budget, one round
per episode, printing a JSON line every minute with the regret against the perfect bot on 400
rounds; at the end it prints ``final_regret`` on 1,000 rounds (seed 7: the same rounds for
every experiment) and saves the model to ``--out``. Each variant changes one setting of the
defaults of that time: 8 envs x 256 steps, batch 512, 4 epochs, learning rate 3e-4, clip 0.2,
entropy coefficient linear from --ent-start to --ent-end over the budget.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from buttonup_env import solver
from buttonup_env.bots import BOT_NAMES, PerfectBot, make_bot
from buttonup_env.encoding import ENCODINGS
from buttonup_env.nets import RingPolicy
from buttonup_env.policy import SB3Policy
from buttonup_env.rules import State, random_layout
from buttonup_env.wrappers import RingObservation


class BotMix:
    """A different bot (among ``names``) every episode."""

    def __init__(self, names: list[str]) -> None:
        self.bots = [make_bot(name) for name in names]
        self.current = self.bots[0]

    def reset(self, rng: np.random.Generator) -> None:
        self.current = self.bots[int(rng.integers(len(self.bots)))]
        self.current.reset(rng)

    def act(self, state: State) -> int:
        return self.current.act(state)


def round_regret(player: SB3Policy, rounds: int, seed: int) -> float:
    """Mean regret per decision of ``player`` against the perfect bot over ``rounds`` rounds."""
    rng = np.random.default_rng(seed)
    bot = PerfectBot(rng)
    total, decisions = 0.0, 0
    for index in range(rounds):
        agent = "RB"[index % 2]
        state = State.new_round(random_layout(rng), "RB"[(index // 2) % 2])
        while not state.round_over:
            if state.to_move == agent:
                slot = player.act(state)
                values = solver.move_values(state)
                total += max(values.values()) - values[slot]
                decisions += 1
            else:
                slot = bot.act(state)
            state = state.play(slot)
    return total / decisions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--encoding", choices=["afterstates", "ring"], default="afterstates")
    p.add_argument("--opponents", default="perfect", help="bots joined by +, e.g. perfect+random")
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--ent-start", type=float, default=0.05)
    p.add_argument("--ent-end", type=float, default=0.005)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--logit-bound", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="save the model here (.zip)")
    args = p.parse_args()
    names = args.opponents.split("+")
    unknown = sorted(set(names) - set(BOT_NAMES))
    if unknown:
        p.error(
            f"--opponents: unknown bot(s) {unknown}; choose from {sorted(BOT_NAMES)} joined by +"
        )
    if not args.minutes > 0:
        p.error(f"--minutes must be > 0, got {args.minutes}")
    th.set_num_threads(2)

    def make() -> gym.Env:
        env = gym.make("ButtonUp-v0", opponent=BotMix(names), episode="round", reward="round")
        return RingObservation(env, encoding=args.encoding)

    model = MaskablePPO(
        RingPolicy,
        DummyVecEnv([make] * 8),
        n_steps=256,
        batch_size=512,
        n_epochs=4,
        gamma=1.0,
        gae_lambda=args.gae_lambda,
        learning_rate=3e-4,
        ent_coef=args.ent_start,
        clip_range=args.clip,
        seed=args.seed,
        device="cpu",
        policy_kwargs=dict(hidden=(256, 256), logit_bound=args.logit_bound),
    )
    player = SB3Policy(model)
    player.encoding = ENCODINGS[args.encoding]
    budget = args.minutes * 60

    class Report(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = time.time()
            self.next_report = 0.0

        def _on_rollout_start(self) -> None:
            progress = min((time.time() - self.start) / budget, 1.0)
            self.model.ent_coef = args.ent_start + (args.ent_end - args.ent_start) * progress

        def _on_step(self) -> bool:
            elapsed = time.time() - self.start
            if elapsed >= self.next_report:
                self.next_report += 60
                print(
                    json.dumps(
                        {
                            "minutes": round(elapsed / 60, 1),
                            "steps": self.num_timesteps,
                            "regret": round(round_regret(player, 400, 123), 3),
                        }
                    ),
                    flush=True,
                )
            return elapsed < budget

    model.learn(10**9, callback=Report())
    print(
        json.dumps(
            {"final_regret": round(round_regret(player, 1000, 7), 4), "steps": model.num_timesteps}
        ),
        flush=True,
    )
    if args.out:
        model.save(args.out)


if __name__ == "__main__":
    main()
