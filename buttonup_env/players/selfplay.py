"""The self-play opponent pool used by ``training/train.py``.

Every training env holds an :class:`OpponentPool` as its opponent. At the start of each
episode the pool draws who plays: one of the learner's frozen *snapshots* (ONNX files that the
training writes to disk; each env loads them itself, never the live training model) or one of
the fixed bots, by the weights of an :class:`OpponentMix`. Among snapshots the newest is drawn
with probability ``newest``, otherwise one of the older ones uniformly (older opponents keep the
learner from forgetting how to beat earlier styles of play). Until the first snapshot exists
its weight is shared among the bots.

With ``prioritized`` above 0 the older snapshot is not drawn uniformly but by *prioritized
fictitious self-play* (AlphaStar's PFSP): with weight ``(1 - x) ** prioritized``, where ``x`` is
the learner's recent score against that snapshot (1 a won round, 0.5 a drawn one, 0 a lost
one; a decaying average over about the last 200 rounds against it, 0.5 before any). Snapshots
that still beat the learner play more often; those it always beats, rarely. The batched env
reports every finished round against a snapshot with :meth:`OpponentPool.record`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..game.rules import State
from .bots import BOT_NAMES, Player, make_bot
from .policy import OnnxPolicy

SNAPSHOT_GLOB = "step_*.onnx"


MAX_POOL = 1_000
"""The most snapshots a pool holds: each one that plays is a policy in memory."""


@dataclass(frozen=True)
class OpponentMix:
    """How often each kind of opponent plays (weights, normalised when drawn).

    The defaults are ``training/train.py``'s: pure self-play, the learner's own snapshots only,
    the newest 90% of the time, an older one otherwise by prioritized fictitious self-play.
    """

    snapshots: float = 1.0
    """Weight of the learner's own snapshots (self-play)."""
    perfect: float = 0.0
    """Weight of the exact solver (PerfectBot)."""
    greedy: float = 0.0
    """Weight of GreedyBot."""
    random: float = 0.0
    """Weight of RandomBot."""
    newest: float = 0.9
    """When a snapshot plays: probability that it is the newest one."""
    max_snapshots: int = 20
    """How many of the newest snapshots are in the pool (at most :data:`MAX_POOL`)."""
    prioritized: float = 2.0
    """Prioritized fictitious self-play: an older snapshot is drawn with weight (1 - the
    learner's recent score against it) ** prioritized; 0: uniformly."""

    def __post_init__(self) -> None:
        weights = (self.snapshots, self.perfect, self.greedy, self.random)
        if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(
                f"opponent weights must be finite and >= 0 with a positive sum, got snapshots="
                f"{self.snapshots}, perfect={self.perfect}, greedy={self.greedy}, "
                f"random={self.random}"
            )
        if not (math.isfinite(self.newest) and 0 <= self.newest <= 1):
            raise ValueError(f"newest must be a probability in [0, 1], got {self.newest}")
        if not 1 <= self.max_snapshots <= MAX_POOL:
            raise ValueError(
                f"max_snapshots must be from 1 to {MAX_POOL:,}, got {self.max_snapshots}"
            )
        if not (math.isfinite(self.prioritized) and self.prioritized >= 0):
            raise ValueError(
                f"prioritized must be >= 0 and finite (0: uniform), got {self.prioritized}"
            )


class OpponentPool:
    """A player that is a different opponent every episode (see the module docstring)."""

    def __init__(
        self,
        snapshot_dir: str | Path,
        mix: OpponentMix,
        refresh_seconds: float = 2.0,
        objective: str = "match",
    ) -> None:
        self.snapshot_dir = Path(snapshot_dir)
        self.mix = mix
        self.refresh_seconds = refresh_seconds
        self.bots: dict[str, Player] = {
            name: make_bot(name, objective=objective) for name in self.KINDS if name in BOT_NAMES
        }
        """The bots it draws; ``objective`` is what its perfect bot plays for (the round, in
        one-round episodes). In the batched env the env's own bots play instead."""
        self._loaded: dict[Path, OnnxPolicy] = {}
        self._snapshots: list[Path] = []
        self._listed_at = -float("inf")
        self.current: Player = self.bots["perfect"]
        self.current_name = "perfect"
        self.results: dict[str, list[float]] = {}
        """Per snapshot file name: the decayed sums [learner's score, rounds] against it."""

    def refresh(self) -> None:
        """Re-read the snapshot folder at the next draw (the trainer calls it after writing a
        snapshot when the pool lives in its process; with ``refresh_seconds=math.inf`` this is
        the only way the pool changes, so that which snapshot plays never depends on timing)."""
        self._listed_at = -math.inf

    def snapshots(self) -> list[Path]:
        """The snapshots in the pool, oldest first (the directory is re-read every
        ``refresh_seconds``, and after :meth:`refresh`)."""
        now = time.monotonic()
        if self._listed_at == -math.inf or now - self._listed_at >= self.refresh_seconds:
            self._listed_at = now
            found = sorted(self.snapshot_dir.glob(SNAPSHOT_GLOB))
            self._snapshots = found[-self.mix.max_snapshots :]
            for stale in set(self._loaded) - set(self._snapshots):
                del self._loaded[stale]
        return self._snapshots

    def snapshot_policy(self, path: Path) -> OnnxPolicy:
        """The snapshot at ``path`` as a sampling player (loaded once, kept while in the pool)."""
        policy = self._loaded.get(path)
        if policy is None:
            policy = self._loaded[path] = OnnxPolicy(path, deterministic=False)
        return policy

    RESULT_DECAY = 0.995
    """Each new round against a snapshot weighs the older ones by this (about 200 rounds)."""

    def record(self, name: str, scores: np.ndarray) -> None:
        """Rounds the learner finished against the snapshot ``name`` (a file name): its scores,
        1 for a won round, 0.5 for a drawn one, 0 for a lost one."""
        decay = self.RESULT_DECAY ** len(scores)
        total = self.results.setdefault(name, [0.0, 0.0])
        total[0] = total[0] * decay + float(np.sum(scores))
        total[1] = total[1] * decay + len(scores)

    def win_rate(self, name: str) -> float:
        """The learner's recent score against snapshot ``name`` (0.5 before any round)."""
        score, rounds = self.results.get(name, (0.0, 0.0))
        return (score + 0.5) / (rounds + 1.0)

    def _older_weights(self, older: list[Path]) -> np.ndarray:
        rates = np.array([self.win_rate(path.name) for path in older])
        weights = (1.0 - np.minimum(rates, 0.99)) ** self.mix.prioritized
        return weights / weights.sum()

    KINDS = ("snapshots", "perfect", "greedy", "random")
    """The kinds of opponent, in the order of :meth:`draw`'s ``kinds``."""

    def draw(
        self, rng: np.random.Generator, size: int
    ) -> tuple[np.ndarray, np.ndarray, list[Path]]:
        """Draw ``size`` opponents at once (the batched env draws one per new episode).

        Returns ``kinds`` (indices into :attr:`KINDS`), ``which`` (for the snapshot kind, the
        index of the snapshot in ``snapshots``) and ``snapshots``, the pool's files.
        """
        snapshots = self.snapshots()
        mix = self.mix
        weights = np.array(
            [mix.snapshots if snapshots else 0.0, mix.perfect, mix.greedy, mix.random]
        )
        if weights.sum() <= 0:
            raise ValueError(
                f"the opponent pool has no snapshot in {self.snapshot_dir} yet and every bot has "
                "weight 0: pure self-play needs the learner's first snapshot before its first "
                "episode (training/train.py writes it at step 0)"
            )
        kinds = rng.choice(len(self.KINDS), size=size, p=weights / weights.sum())
        n = len(snapshots)
        which = np.full(size, n - 1, dtype=np.int64)  # the newest ...
        if n > 1:  # ... or, with probability 1 - newest, one of the older ones
            older = rng.random(size) >= mix.newest
            if mix.prioritized:
                p = self._older_weights(snapshots[:-1])
                which[older] = rng.choice(n - 1, size=int(older.sum()), p=p)
            else:
                which[older] = rng.integers(n - 1, size=int(older.sum()))
        return kinds, which, snapshots

    def reset(self, rng: np.random.Generator) -> None:
        """Draw the opponent of the next episode with ``rng``."""
        kinds, which, snapshots = self.draw(rng, 1)
        name = self.KINDS[int(kinds[0])]
        if name == "snapshots":
            path = snapshots[int(which[0])]
            self.current = self.snapshot_policy(path)
            self.current_name = path.stem
        else:
            self.current = self.bots[name]
            self.current_name = name
        reset = getattr(self.current, "reset", None)
        if callable(reset):
            reset(rng)

    def act(self, state: State) -> int:
        """The current opponent's move."""
        return self.current.act(state)

    def __repr__(self) -> str:
        return f"OpponentPool({str(self.snapshot_dir)!r}, current={self.current_name!r})"
