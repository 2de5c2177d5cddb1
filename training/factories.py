"""What a run trains with, made from its config: the training envs (three kinds of vector env;
only the batched one, ``--vec-env batched``, is saved in checkpoints and resumes exactly), the
MaskablePPO model, and the snapshots of the learner that join the opponent pool."""

from __future__ import annotations

import dataclasses
import functools
import math
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from buttonup_env.envs.vector import ButtonUpVectorEnv
from buttonup_env.envs.wrappers import RingObservation
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.learn.onnx_writer import export_onnx
from buttonup_env.learn.sb3 import SB3VecEnv, TensorRolloutBuffer
from buttonup_env.players.selfplay import OpponentMix, OpponentPool
from training.config import ENV_REWARDS, RunConfig, learning_rates, make_policy
from training.distributed import Solo, Team, rank_seed
from training.runfolder import RunFiles


class PoolEnv(gym.Wrapper):
    """A training env that lets the trainer tell its opponent pool about a new snapshot
    (``venv.env_method("refresh_pool")``, also across processes)."""

    def __init__(self, env: gym.Env, pool: OpponentPool) -> None:
        super().__init__(env)
        self.pool = pool

    def refresh_pool(self) -> None:
        self.pool.refresh()

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()


def make_env(
    snapshot_dir: Path, mix: OpponentMix, encoding: str, reward: str, objective: str
) -> gym.Env:
    """One training env: ButtonUp-v1 seen through ``encoding``, its episodes those of the
    ``objective`` (a match, or one round), paid by ``reward`` (--reward), and the opponent
    pool as opponent. The pool takes in a new snapshot when the trainer says so (never on a
    timer: which snapshot plays must not depend on timing)."""
    pool = OpponentPool(snapshot_dir, mix, refresh_seconds=math.inf, objective=objective)
    env = gym.make("ButtonUp-v1", opponent=pool, episode=objective, reward=ENV_REWARDS[reward])
    return PoolEnv(RingObservation(env, encoding=encoding), pool)


def make_worker_env(
    snapshot_dir: Path, mix: OpponentMix, encoding: str, reward: str, objective: str
) -> gym.Env:
    """``make_env`` in a SubprocVecEnv worker. Ctrl-C in a terminal reaches the whole process
    group; the workers ignore it and leave the stopping to the main process
    (``training.callbacks.StopRequest``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return make_env(snapshot_dir, mix, encoding, reward, objective)


def make_vec_env(config: RunConfig, run_dir: Path, seed: int | None = None) -> VecEnv:
    """``n_envs`` training envs (seeded with ``seed``, default the config's), their opponent
    pools reading the snapshots of ``run_dir``."""
    if config.vec_env == "batched":
        # the trainer refreshes the pool after each snapshot: no timing in which one plays
        pool = OpponentPool(
            run_dir / "snapshots",
            config.opponents,
            refresh_seconds=math.inf,
            objective=config.objective,
        )
        batch = ButtonUpVectorEnv(
            config.n_envs,
            opponent=pool,
            episode=config.objective,
            reward=ENV_REWARDS[config.reward],
            encoding=config.encoding,
            random_start=config.random_start,
            random_score=config.random_score,
            truncate_rounds=config.bootstrap_rounds,
        )
        venv: VecEnv = SB3VecEnv(batch)
        venv.seed(config.seed if seed is None else seed)
        return venv
    subproc = config.vec_env == "subproc"
    make = functools.partial(
        make_worker_env if subproc else make_env,
        run_dir / "snapshots",
        config.opponents,
        config.encoding,
        config.reward,
        config.objective,
    )
    fns = [make] * config.n_envs
    venv = SubprocVecEnv(fns) if subproc else DummyVecEnv(fns)
    venv.seed(config.seed if seed is None else seed)
    return venv


def refresh_pools(venv: VecEnv) -> None:
    """Have the opponent pools of ``venv`` re-read the snapshot folder at their next draw."""
    batch = getattr(venv, "env", None)
    if isinstance(batch, ButtonUpVectorEnv):
        if batch.pool is not None:
            batch.pool.refresh()
    else:
        venv.env_method("refresh_pool")


def worker_config(config: RunConfig, rank: int) -> RunConfig:
    """What worker ``rank`` of the run ``config`` trains with: the run's settings (its own
    ``n_envs`` games, its own minibatches of ``batch_size``, as CleanRL's multi-GPU PPO: a
    worker's share of a rollout and an update is a whole process's work, so that adding workers
    adds throughput) and its own seed (``training.distributed.rank_seed``)."""
    return dataclasses.replace(config, seed=rank_seed(config.seed, rank))


def make_model(config: RunConfig, venv: VecEnv, tensorboard_log: Path | None = None) -> MaskablePPO:
    """A new MaskablePPO with ``config``'s network (made by ``config.make_policy``) and
    hyperparameters, logging to TensorBoard in ``tensorboard_log``, or without it nowhere
    (left to itself, SB3 makes an empty folder in the temporary directory at every learn)."""
    model = MaskablePPO(
        lambda observation_space, action_space, lr_schedule: make_policy(config, lr_schedule),
        venv,
        learning_rate=learning_rates(config)[0],
        n_steps=config.n_steps,
        rollout_buffer_class=TensorRolloutBuffer,
        # with active_features the minibatches come as lists of active features already
        rollout_buffer_kwargs=(
            dict(view_size=ENCODINGS[config.encoding].view_size) if config.active_features else {}
        ),
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef_start,
        seed=config.seed,
        device="cpu",
        tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
    )
    if tensorboard_log is None:
        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def write_snapshot(model: MaskablePPO, run_dir: Path, team: Team | None = None) -> Path:
    """Add the learner as it is now to the opponent pool (``snapshots/step_N.onnx``). With
    several workers, worker 0 writes it and every other worker a copy of its bytes, into the
    folder its own pool reads."""
    path = RunFiles(run_dir).snapshot_path(model.num_timesteps)
    steps = model.num_timesteps
    (team or Solo()).share_file(path, lambda out: export_onnx(model.policy, out, {"steps": steps}))
    return path
