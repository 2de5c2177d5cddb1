"""Helper for the network tests (not a test module): observations of random play in the
batched env."""

from __future__ import annotations

import numpy as np

from buttonup_env.envs.vector import ButtonUpVectorEnv


def random_play(
    envs: int, steps: int, seed: int, encoding: str = "afterstates"
) -> tuple[np.ndarray, np.ndarray]:
    """Observations and legal-move masks of ``envs`` one-round games in ``encoding``, for
    ``steps`` agent moves each (a legal move drawn uniformly), against the random bot: every
    position the agents met, one row each."""
    env = ButtonUpVectorEnv(envs, opponent="random", encoding=encoding, episode="round")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    seen, masks = [], []
    for _ in range(steps):
        mask = env.action_masks()
        seen.append(obs.copy())
        masks.append(mask)
        choice = (rng.random(len(mask)) * mask.sum(1)).astype(int)
        actions = np.array([np.flatnonzero(row)[k] for row, k in zip(mask, choice, strict=True)])
        obs, *_ = env.step(actions)
    return np.concatenate(seen), np.concatenate(masks)
