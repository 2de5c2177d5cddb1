"""What a training run is made of: :class:`TrainConfig` (the flags of ``training/train.py``,
each with its docstring), the presets that fill the budgets left unset, :func:`resolve`, which
makes a command line a :class:`RunConfig` (frozen and concrete: every budget set, the workers
counted) once and checks it, and the policy network a config describes (:func:`make_policy`).
``train.py`` trains with its resolved command line, ``tune.py`` builds trials from it, the run
folder saves it, the benchmarks measure it: change a default here and every one follows.
Every count and interval carries its bounds in its type (``Annotated[int, Range(1, 100)]``,
read by :mod:`training.typed_json`): one declaration holds ``train.py``'s flags, a saved
``config.json`` and ``tune.py``'s trials alike, a value out of bounds refused in one sentence."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import tyro
from gymnasium import spaces

from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.learn.hardware import fast_bfloat16
from buttonup_env.players.league import DEFAULT_LADDER, check_ladder
from buttonup_env.players.selfplay import OpponentMix
from training.bounds import (
    MAX_ENVS,
    MAX_EPOCHS,
    MAX_LAYERS,
    MAX_MARGIN_WEIGHT,
    MAX_MATCHES,
    MAX_PARAMETERS,
    MAX_PERIODIC,
    MAX_ROLLOUT_BYTES,
    MAX_ROLLOUT_STEPS,
    MAX_THREADS,
    ROUND_HIDDEN,
    Hidden,
    Interval,
    Ladder,
    Matches,
    Minutes,
    RunName,
    Seed,
    Steps,
    check_ranges,
)
from training.typed_json import Omittable, Range, check_fields

if TYPE_CHECKING:  # torch is imported where a network is made: reading settings needs none
    from buttonup_env.learn.nets import RingPolicy

SELF_PLAY = OpponentMix()
"""The default opponents, of every preset: pure self-play. Only the learner's own snapshots
play; 90% of the time the newest, otherwise an older one by prioritized fictitious self-play
(weight (1 - the learner's recent score against it) ** 2)."""

SOLVER_MIX = OpponentMix(
    snapshots=0.1, perfect=0.8, greedy=0.05, random=0.05, newest=0.5, prioritized=0.0
)
"""A mix with the solver: the perfect bot in 80% of the episodes, snapshots in 10%, the greedy
and random bots 5% each (slower: a solver look-up a step). Pass it weight by weight
(``--opponents.perfect 0.8 ...``); the solver still never enters the loss or reward."""


OBJECTIVES = {"match": ("match-afterstates", "match"), "round": ("afterstates", "margin")}
"""Each objective and what ``auto`` resolves its --encoding and --reward to."""
REWARDS = {"match": ("match", "match-and-margins"), "round": ("margin", "sign")}
"""The rewards each objective takes (see :attr:`TrainConfig.reward`)."""
ENV_REWARDS = {"match": "match", "match-and-margins": "round", "margin": "round", "sign": "match"}
"""--reward as ButtonUp-v1's reward argument (for the episodes of its objective)."""


@dataclass(frozen=True)
class TrainConfig:
    """Self-play MaskablePPO on ButtonUp-v1: the match to 15 (matches as episodes, the
    match-afterstates encoding) or one round (round episodes, the afterstates encoding)."""

    preset: Literal["full", "quick", "smoke"] = "full"
    """full: the shipped agent's run (15 minutes); quick: 5 minutes, the README's quick start;
    smoke: seconds, for tests. A preset sets total_steps, minutes, the eval, snapshot and
    checkpoint intervals, the eval sizes and --hidden; any of those flags given on the command
    line (before or after --preset) overrides the preset's value. Every preset trains by pure
    self-play (see --opponents)."""
    total_steps: Steps | None = None
    """Environment steps (agent decisions) to train for (default: from the preset)."""
    minutes: Minutes | None = None
    """Training time budget: stop after this many minutes of training (periodic evaluations
    included, counted across resumes) even before total_steps; 0: no time budget (default:
    from the preset). The entropy schedule follows whichever budget is further along."""
    seed: Seed = 0
    """Seed of the networks, the envs and the opponents' draws."""
    run_name: RunName | None = None
    """Folder name under runs_dir (default: PRESET-sSEED-DATE-TIME)."""
    runs_dir: Path = Path("runs")
    """Where run folders are made."""
    resume: Path | None = None
    """Continue the run in this folder from its last checkpoint (other flags are ignored)."""

    objective: Literal["match", "round"] = "match"
    """What the learner plays for. match: the match to 15, the game of the rules (episodes are
    matches, paid +1 or -1 for the match; perfect is perfect play of the match). round: one
    round from 0-0 (episodes are rounds, paid by --reward; perfect is the margin player's)."""
    encoding: Literal["auto", "match-afterstates", "afterstates", "ring"] = "auto"
    """What the policy sees (buttonup_env.game.encoding): match-afterstates (the position after
    each legal move and the match after it: each player's points to go and who starts), or,
    blind to the match, afterstates (the ring after each legal move) or ring (the ring from
    each legal move). auto: match-afterstates for --objective match, else afterstates."""
    n_envs: Annotated[int, Range(1, MAX_ENVS)] = 256
    """Environments stepped together."""
    vec_env: Literal["batched", "dummy", "subproc"] = "batched"
    """batched: one ButtonUpVectorEnv stepping all envs with array operations
    (buttonup_env.envs.vector); dummy: ButtonUp-v1 envs one after the other in this process;
    subproc: one process per ButtonUp-v1 env."""
    hidden: Hidden | None = None
    """Sizes of the per-view hidden layers of actor and critic (default: the preset's: 256 256
    256 in full, 256 256 in quick, 128 128 in smoke and with --objective round)."""
    shared: bool = True
    """Actor and critic share their per-view hidden layers (--no-shared: twice the work)."""
    bfloat16: bool = dataclasses.field(default_factory=fast_bfloat16)
    """Multiply in bfloat16 in the per-view layers (buttonup_env.learn.nets.RingPolicy): by
    default where the CPU does it in hardware (buttonup_env.learn.hardware.fast_bfloat16: updates
    run about 1.5 times as fast), not elsewhere (emulated, slower)."""
    critic: Literal["expected", "pooled"] = "expected"
    """How the critic values a position (buttonup_env.learn.nets.RingViews): expected, the value of
    each move's afterstate (one linear unit on its view's features) weighted by the policy's
    probability of the move; pooled, a linear layer on the mean and the max of the views'
    features (its backward pass makes updates about a third slower)."""
    active_features: bool = True
    """The first layer adds up the weight rows of each view's active features (at most 11 of
    245 inputs are 1; buttonup_env.learn.active), in float32: the dense layer's function with a
    twentieth of its arithmetic (updates take a fifth less time). --no-active-features: the
    dense layer (in bfloat16 with --bfloat16). Exported policies are dense either way."""
    learning_rate: float = 2e-3
    """Adam learning rate at the start of the run, for one worker: with N workers the run
    uses it times the square root of N (training.config.learning_rates)."""
    learning_rate_end: float | None = 2e-4
    """The learning rate decays linearly to this value (times the square root of the
    workers, as --learning-rate) over the run (steps or time budget, as the entropy
    coefficient does); None: a constant --learning-rate."""
    n_steps: Annotated[int, Range(1, MAX_ROLLOUT_STEPS)] = 16
    """Steps per env per rollout (rollout = n_envs * n_steps)."""
    batch_size: Annotated[int, Range(1, MAX_ENVS * MAX_ROLLOUT_STEPS)] = 1024
    """Minibatch size."""
    n_epochs: Annotated[int, Range(1, MAX_EPOCHS)] = 4
    """Passes over each rollout."""
    gamma: float = 1.0
    """Discount (1: a round's or a match's result counts alike at each of its moves)."""
    gae_lambda: float = 0.8
    """GAE lambda (1: plain Monte-Carlo returns, the critic only as a baseline; below 1 the
    critic's values of later positions stand in for part of the return)."""
    clip_range: float = 0.2
    """PPO clip range."""
    ent_coef_start: float = 0.4
    """Entropy coefficient at the start; it decays linearly ..."""
    ent_coef_end: float = 0.001
    """... to this value at the end of the run."""
    reward: Literal["auto", "match", "match-and-margins", "margin", "sign"] = "auto"
    """What an episode pays. --objective match: match (+1 or -1 when the match ends) or
    match-and-margins (also every round's margin / 18). --objective round: margin (own strength
    minus the opponent's, / 18: round points) or sign (+1, 0 or -1). auto: match, or margin."""

    bootstrap_rounds: bool = True
    """With --objective match (--objective round turns it off): each round of a training match
    is an episode for PPO, truncated at its end, whose return is the value of the next round's
    start (--bootstrap-values), not the match's result; only a match's last round is paid its
    result, so the rounds' returns carry less of the later rounds' luck (the results log).
    Needs --vec-env batched: --no-bootstrap-rounds for the others."""
    bootstrap_values: Literal["auto", "critic", "table", "scaled-table"] = "auto"
    """What values a bootstrapped round's end: the critic at the next round's start; a table of
    the match at each round start learnt from the training's own rounds (saved with a resume
    point); scaled-table: that table, each round's result centred and scaled by the mean and
    spread of those from its start, so every score's rounds teach alike (the best moves
    unchanged). auto: scaled-table, or critic where no round is bootstrapped."""
    margin_weight: float = 1.0
    """With --reward match-and-margins: the rounds' margins' weight at the start of the run
    (1: as ButtonUp-v1 pays them, margin / 18; 4: a 4.5-point round counts as the match) ..."""
    margin_weight_end: float = 1.0
    """... and at its end, linearly between (as the entropy): with 4 and 0 an agent learns the
    rounds from their margins first and plays for the match alone at the end."""

    random_start: float = 0.5
    """Probability that an episode's first round starts after 1 to 6 random moves (played by
    whoever is to move; the agent then takes the side to move), so that the agent meets
    positions off the usual paths. Needs --vec-env batched."""
    random_score: float = 0.5
    """With --objective match (--objective round turns it off): probability that a training
    match starts at a score drawn below the target (0 to 14 points each, the starter's the
    fewer, as in a match), so that the agent meets every score. Needs --vec-env batched."""

    opponents: OpponentMix = SELF_PLAY
    """Who the learner plays (buttonup_env.players.selfplay); by default its own snapshots."""
    snapshot_every: Interval | None = None
    """Steps between snapshots of the learner added to the opponent pool."""
    average_last: Annotated[float, Range(0.0, 1.0), Omittable()] = 0.5
    """The share of the run, at its end, whose snapshots are averaged with the last weights
    into RUN/averaged.onnx (stochastic weight averaging: a best response gains less against
    it); 0: no averaged.onnx."""
    eval_every: Interval | None = None
    """Steps between evaluations against the fixed bots."""
    eval_matches: Matches | None = None
    """Matches against each bot in a periodic evaluation."""
    checkpoint_every: Interval | None = None
    """Steps between checkpoints (one is also written on Ctrl-C or kill, and at the end)."""
    final_eval_matches: Matches | None = None
    """Matches against the random bot after training."""
    ladder: Ladder = DEFAULT_LADDER
    """The reference players each periodic evaluation rates the learner against (Elo, the
    random bot at 0; see buttonup_env.players.league)."""
    ladder_matches: Annotated[int, Range(0, MAX_MATCHES)] = 300
    """Matches against the ladder in each periodic evaluation, shared evenly among its
    players; 0: no rating."""
    threads: Annotated[int, Range(1, MAX_THREADS)] = 1
    """torch threads of each worker (1: fastest on a shared 2-core machine, where a second
    thread waits on the other processes; at most four times the machine's cores)."""
    workers: int | Literal["auto"] = "auto"
    """Processes that train the run together, data-parallel on torch.distributed
    (docs/training.md): each steps its own n_envs games and minibatches of batch_size, and the
    gradients are averaged before every update (a run's rollout and minibatch are workers times
    as large). auto: the physical cores this process may run on, at most 8; 1: one process,
    without torch.distributed. A run resumes with the workers it was started with."""
    progress: bool = True
    """Show a progress bar."""


PRESETS: dict[str, dict[str, Any]] = {
    "full": dict(
        hidden=(256, 256, 256),  # the match wants the width and a third layer (the results log)
        total_steps=100_000_000,
        minutes=14.5,
        snapshot_every=500_000,
        eval_every=1_000_000,
        eval_matches=200,
        checkpoint_every=1_000_000,
        final_eval_matches=1000,
    ),
    "quick": dict(
        hidden=(256, 256),
        total_steps=100_000_000,
        minutes=4.5,
        snapshot_every=250_000,
        eval_every=500_000,
        eval_matches=200,
        checkpoint_every=500_000,
        final_eval_matches=200,
    ),
    "smoke": dict(
        hidden=ROUND_HIDDEN,
        total_steps=4_096,
        minutes=0,
        snapshot_every=2_048,
        eval_every=2_048,
        eval_matches=4,
        checkpoint_every=2_048,
        final_eval_matches=10,
    ),
}


Workers = Annotated[int, Range(1, 2**20)]
"""A run's number of worker processes (``train.py`` starts at most four per logical CPU;
torchrun starts more across machines)."""


@dataclass(frozen=True, kw_only=True)
class RunConfig(TrainConfig):
    """A run's settings, resolved (:func:`resolve`): the flags of :class:`TrainConfig` with
    every budget and interval that the preset fills set, and ``workers`` a number. A run's
    ``config.json`` holds one, field for field; every function below a script's ``main``
    takes one. (It is a command line too: :func:`training.runfolder.train_flags` writes the
    flags that give it.)"""

    total_steps: Steps
    minutes: Minutes
    """0: no time budget."""
    resume: None = None
    """A run's own settings never ask to resume one (``config.json`` keeps the key, null)."""
    snapshot_every: Interval
    eval_every: Interval
    eval_matches: Matches
    checkpoint_every: Interval
    final_eval_matches: Matches
    workers: Workers
    hidden: Hidden
    bootstrap_values: Literal["critic", "table", "scaled-table"]
    encoding: Literal["match-afterstates", "afterstates", "ring"]
    reward: Literal["match", "match-and-margins", "margin", "sign"]


def learning_rates(config: RunConfig) -> tuple[float, float | None]:
    """The learning rate at the start and at the end of the run ``config``: its
    ``learning_rate`` and ``learning_rate_end`` times the square root of its workers. N workers
    take steps of N times the samples in 1/N of the updates; Adam's square-root scaling rule
    (Malladi et al., "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms", 2022)
    takes larger steps for that (docs/experiments.md has the screen that chose it)."""
    scale = math.sqrt(config.workers)
    end = config.learning_rate_end
    return config.learning_rate * scale, None if end is None else end * scale


def parse_config(argv: list[str], **tyro_kwargs: Any) -> TrainConfig:
    """train.py's command line as a TrainConfig (not yet resolved: the preset fills the fields
    left unset in :func:`resolve`)."""
    return tyro.cli(TrainConfig, args=argv, **tyro_kwargs)


def preset_values(config: TrainConfig) -> dict[str, Any]:
    """``config``'s fields, those it leaves unset filled from its preset."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(TrainConfig)}
    for name, value in PRESETS[config.preset].items():
        if values[name] is None:
            values[name] = value
    return values


def resolve(config: TrainConfig) -> RunConfig:
    """The run the command line ``config`` asks for: the preset's fields filled, ``--objective
    round`` without the match episodes' random scores and bootstrapped rounds (and on the
    round's network), ``workers`` counted (:func:`training.distributed.auto_workers` for auto),
    every value checked (:func:`check`): ``ValueError`` naming the flag. A command line that
    resumes a run is not resolved (the run folder has its settings)."""
    values = preset_values(config)
    values.pop("resume")
    encoding, reward = OBJECTIVES[config.objective]
    values["encoding"] = encoding if config.encoding == "auto" else config.encoding
    values["reward"] = reward if config.reward == "auto" else config.reward
    if config.objective == "round":  # a round episode has no score to start at, no next round
        values["random_score"], values["bootstrap_rounds"] = 0.0, False
        values["hidden"] = ROUND_HIDDEN if config.hidden is None else config.hidden
    if values["bootstrap_values"] == "auto":  # critic: unused without bootstrapped rounds
        values["bootstrap_values"] = "scaled-table" if values["bootstrap_rounds"] else "critic"
    workers = values.pop("workers")
    if workers == "auto":
        from training.distributed import auto_workers  # torch.distributed: only here

        workers = auto_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"--workers must be auto or a whole number >= 1, got {workers}")
    return check(RunConfig(**values, workers=workers))


def check(config: RunConfig) -> RunConfig:
    """``config``, once it keeps the rules of a run: the ranges, each value in its type's
    bounds, and the rules between them (``ValueError`` naming the flags). A new run's settings
    and a saved ``config.json`` are held to the same."""
    check_ranges({f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
    check_fields(config)
    if not 1 <= len(config.hidden) <= MAX_LAYERS:
        raise ValueError(f"--hidden needs 1 to {MAX_LAYERS} layer sizes, got {len(config.hidden)}")
    for name in ("snapshot_every", "eval_every"):
        every = getattr(config, name)
        if config.total_steps // every > MAX_PERIODIC:
            least = -(-config.total_steps // MAX_PERIODIC)
            raise ValueError(
                f"--{name.replace('_', '-')} {every} would make {config.total_steps // every:,} "
                f"{'snapshots' if name == 'snapshot_every' else 'evaluations'} in "
                f"--total-steps {config.total_steps}, more than the {MAX_PERIODIC:,} a run may "
                f"make; give at least {least}"
            )
    for flag, value in (
        ("--random-start", config.random_start),
        ("--random-score", config.random_score),
    ):
        if not 0 <= value <= 1:
            raise ValueError(f"{flag} must be a probability in [0, 1], got {value}")
    check_objective(config)
    batched_only = [  # say it; don't drop them silently: (flag, what turns it off)
        (flag, off)
        for flag, on, off in (
            ("--random-start", config.random_start, "--random-start 0"),
            ("--random-score", config.random_score, "--random-score 0"),
            ("--opponents.prioritized", config.opponents.prioritized, "--opponents.prioritized 0"),
            ("--margin-weight", config.margin_weight != 1.0, "--margin-weight 1"),
            ("--margin-weight-end", config.margin_weight_end != 1.0, "--margin-weight-end 1"),
            ("--bootstrap-rounds", config.bootstrap_rounds, "--no-bootstrap-rounds"),
        )
        if on
    ]
    if batched_only and config.vec_env != "batched":
        flags = [flag for flag, _ in batched_only]
        raise ValueError(
            f"{' and '.join(flags)} {'need' if len(flags) > 1 else 'needs'} "
            f"--vec-env batched (got --vec-env {config.vec_env}, whose single envs neither "
            "start at random positions or scores, weigh the rounds' margins, end episodes at "
            "rounds, nor report results for prioritized self-play); "
            f"add {' '.join(off for _, off in batched_only)}"
        )
    ladder = check_ladder(config.ladder)  # ValueError naming a bad player
    if config.ladder_matches and config.ladder_matches < len(ladder):
        raise ValueError(
            f"--ladder-matches must be 0 (no rating) or at least one match per ladder player "
            f"({len(ladder)}), got {config.ladder_matches}"
        )
    if config.batch_size > config.n_envs * config.n_steps:
        raise ValueError(
            f"--batch-size {config.batch_size} is larger than a rollout "
            f"(--n-envs x --n-steps = {config.n_envs * config.n_steps})"
        )
    check_size(config)
    return config


def check_objective(config: RunConfig) -> None:
    """``ValueError`` naming the flags when the reward, the margins' weights, the bootstrapped
    rounds or the random scores do not fit ``config``'s objective."""
    if config.reward not in REWARDS[config.objective]:
        allowed = " or ".join(REWARDS[config.objective])
        raise ValueError(
            f"--reward {config.reward} is not a reward of --objective {config.objective}; use "
            f"{allowed} (or auto)"
        )
    weights = {
        "--margin-weight": config.margin_weight,
        "--margin-weight-end": config.margin_weight_end,
    }
    for flag, weight in weights.items():
        if not 0 <= weight <= MAX_MARGIN_WEIGHT:
            raise ValueError(f"{flag} must be in [0, {MAX_MARGIN_WEIGHT}], got {weight}")
        if weight != 1 and config.reward != "match-and-margins":
            raise ValueError(
                f"{flag} {weight} weighs the rounds' margins of --reward match-and-margins, not "
                f"of --reward {config.reward}"
            )
    if config.bootstrap_values != "critic" and not config.bootstrap_rounds:
        fix = "--bootstrap-rounds" if config.objective == "match" else "--objective match"
        raise ValueError(
            f"--bootstrap-values {config.bootstrap_values} values the ends of bootstrapped "
            f"rounds, which --objective {config.objective} does not have here; add {fix} or "
            "--bootstrap-values critic"
        )
    if config.bootstrap_rounds and config.objective != "match":
        raise ValueError(
            "--bootstrap-rounds needs --objective match (a round's end is a round episode's "
            "end); add --no-bootstrap-rounds"
        )
    if config.random_score and config.objective != "match":
        raise ValueError(
            f"--random-score {config.random_score} needs --objective match (a round is played "
            "from 0-0); add --random-score 0"
        )


def check_size(config: RunConfig) -> None:
    """``ValueError`` when ``config`` asks for a network or a rollout larger than
    :data:`MAX_PARAMETERS` or :data:`MAX_ROLLOUT_BYTES` (a crafted config.json would otherwise
    exhaust the memory before any check of the tensors). The network is built on torch's
    ``meta`` device, which allocates nothing, and its parameters counted."""
    rollout = config.n_envs * config.n_steps * ENCODINGS[config.encoding].size * 4
    if rollout > MAX_ROLLOUT_BYTES:
        raise ValueError(
            f"--n-envs {config.n_envs} x --n-steps {config.n_steps} would hold {rollout:,} "
            f"bytes of observations, more than the {MAX_ROLLOUT_BYTES:,} a run may ask for"
        )
    import torch as th  # here, not at the top: reading a config needs no torch

    with th.device("meta"):
        parameters = sum(p.numel() for p in make_policy(config).parameters())
    if parameters > MAX_PARAMETERS:
        raise ValueError(
            f"--hidden {' '.join(map(str, config.hidden))}: its network would have "
            f"{parameters:,} parameters, more than the {MAX_PARAMETERS:,} a run may ask for"
        )


def make_policy(
    config: RunConfig, lr_schedule: Callable[[float], float] | None = None
) -> RingPolicy:
    """The policy network of ``config``, freshly made: a
    ``buttonup_env.learn.nets.RingPolicy`` on its encoding's views, with its layer sizes,
    shared layers, bfloat16 products, critic and first layer, and its Adam optimiser. Training
    has MaskablePPO build it with ``lr_schedule`` (train.py's ``make_model``); an export builds
    it alone and loads a checkpoint's weights into it."""
    from buttonup_env.learn.nets import RingPolicy  # torch: here, not at the top

    view = ENCODINGS[config.encoding]
    return RingPolicy(
        spaces.Box(0.0, 1.0, (view.size,), np.float32),
        spaces.Discrete(view.actions),
        lr_schedule or (lambda _: config.learning_rate),
        hidden=config.hidden,
        shared=config.shared,
        bfloat16=config.bfloat16,
        critic=config.critic,
        active_features=config.active_features,
    )
