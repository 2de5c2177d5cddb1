"""Evaluate a policy against a bot or another policy.

    python training/evaluate.py --model buttonup-ppo --opponent perfect --matches 500
    python training/evaluate.py --model a.onnx --opponent b.onnx --matches 200 --record games.jsonl

Plays N matches with the seats alternating (and the first round's starter alternating every two
matches) and prints, from the model's side: matches won and lost with a 95% Wilson interval,
the mean round margin, the mean regret per decision (how many round points worse than the exact
solver's best move the model's choice was, averaged over the model's decisions), the same regret
for each of a round's eight moves (where the mistakes sit) and matches per second, measured
as a card and the training log measure (``buttonup_env.players.evaluation.evaluate``: the same
matches for one seed). ``--json FILE`` writes the same figures; ``--record FILE`` writes the
games as match records (``docs/rules.md``), which ``python -m buttonup_env.replay FILE``
checks. Neither replaces an
existing file without ``--force``, nor a policy the command reads, nor the other.

A player is ``random``, ``greedy``, ``perfect``, a graded bot ``perfect-P`` (a random legal move
with probability P, the perfect move otherwise), the name of a shipped policy (``buttonup-ppo``)
or a path to an exported ``.onnx`` policy (an SB3 ``.zip`` only with ``--trusted``: loading one
runs pickled code).

``--opponent best-response`` measures exploitability instead, exactly and without sampling, at
both levels. The **match** exploitability: how much more often than half the best possible
reply strategy wins the match to ``--target`` against the model, from 0-0, averaged over its
seat and the first round's starter (``buttonup_env.players.best_response``; perfect play of
the match scores 0, the margin player 0.0564 at 15). The **round** exploitability: how many
round points the best reply gains against the model's choices in one round, beyond the round's
value, averaged over all 1,680 set-ups and both seats at 0-0 (``buttonup_env.players.exploit``).
The random and greedy bots' figures are printed beside them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import tyro
from tqdm import tqdm

from buttonup_env.game.equity import MAX_SOLVED_TARGET
from buttonup_env.game.files import reason
from buttonup_env.game.records import write_records
from buttonup_env.game.rules import LAYOUTS, MAX_TARGET
from buttonup_env.players.best_response import match_best_response
from buttonup_env.players.bots import BOT_NAMES, GreedyBot, Player, RandomBot, graded_p, make_bot
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import PolicyError, load_policy
from buttonup_env.players.shipped import shipped_policies
from buttonup_env.ui.cli import Named, check_outputs, run_cli, write_output
from training.config import Matches, Seed
from training.typed_json import Range, check_fields


@dataclass
class EvaluateArgs:
    """Evaluate a policy (or bot) against an opponent over whole matches."""

    model: str
    """The player measured: a .onnx policy, a shipped policy's name, random|greedy|margin|
    perfect, or a graded bot perfect-P (a random legal move with probability P, else the
    perfect one)."""
    opponent: str = "random"
    """random|greedy|margin|perfect, a graded bot perfect-P, a shipped policy's name, a path to
    another policy, or best-response (the match and round exploitability)."""
    matches: Matches = 1000
    """Matches to play."""
    seed: Seed = 0
    """Seed of the layouts and of the players' random choices."""
    target: Annotated[int, Range(1, MAX_TARGET)] = 15
    """Points that win a match."""
    json: Path | None = None
    """Write the figures to this JSON file (its folder must exist)."""
    record: Path | None = None
    """Write the games to this JSON Lines file (match records, see docs/rules.md)."""
    force: bool = False
    """Replace the --json and --record files if they exist (without it, an existing file is
    kept and the command stops before any match)."""
    trusted: bool = False
    """Allow loading SB3 .zip files (they unpickle code: only files you made)."""
    progress: bool = True
    """Show a progress bar."""


def player_file(spec: str) -> Path | None:
    """The file a player ``spec`` names, None for a bot or a shipped policy (an input of the
    command, which no output may replace)."""
    if spec in BOT_NAMES or spec == BEST_RESPONSE or spec in shipped_policies():
        return None
    try:
        if graded_p(spec) is not None:
            return None
    except ValueError:
        pass
    return Path(spec)


def load_player(spec: str, trusted: bool) -> Player:
    """A bot, a graded bot or a shipped policy by name, or a policy from a file; ``ValueError``
    otherwise."""
    if spec in BOT_NAMES or graded_p(spec) is not None:  # graded_p raises for perfect-<not P>
        return make_bot(spec)
    if spec in shipped_policies():
        return load_policy(spec)
    path = Path(spec)
    if not path.exists():
        raise ValueError(
            f"{spec!r} is neither a bot ({', '.join(BOT_NAMES)}), a shipped policy "
            f"({', '.join(shipped_policies())}) nor an existing policy file"
        )
    return load_policy(path, trusted=trusted)


BEST_RESPONSE = "best-response"


def best_response(args: EvaluateArgs, model: Player) -> int:
    """Print (and write with --json) the match and round exploitability of the model and of
    two bots."""
    figures: dict[str, dict] = {}
    for name, player in ((args.model, model), ("random", RandomBot()), ("greedy", GreedyBot())):
        with tqdm(
            total=args.target**2, unit="score", disable=not args.progress, leave=False, desc=name
        ) as bar:
            match = match_best_response(
                player, args.target, progress=lambda done, total, bar=bar: _count(bar, done, total)
            )
        with tqdm(
            total=len(LAYOUTS), unit="set-up", disable=not args.progress, leave=False, desc=name
        ) as bar:
            result = exploitability(player, progress=lambda n, bar=bar: bar.update(n - bar.n))
        figures[name] = {"match": match.to_dict(), "round": asdict(result)}
        print(f"{name}: {match.summary()}")
        print(f"{name}: round {result.summary()}")
    if args.json is not None:
        figures = {"opponent": BEST_RESPONSE, **figures}
        write_output(args.json, (json.dumps(figures, indent=2) + "\n").encode())
        print(f"figures written to {args.json}")
    return 0


def _count(bar: tqdm, done: int, total: int) -> None:
    bar.total = total
    bar.update(done - bar.n)


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(EvaluateArgs, args=argv, description=__doc__)
    try:
        check_fields(args)
        inputs: list[Named] = [("--model", player_file(args.model))]
        inputs.append(("--opponent", player_file(args.opponent)))
        check_outputs([("--json", args.json), ("--record", args.record)], inputs, args.force)
        model = load_player(args.model, args.trusted)
        if args.opponent == BEST_RESPONSE:
            if args.target > MAX_SOLVED_TARGET:
                raise ValueError(
                    f"--opponent {BEST_RESPONSE} measures the match to --target, which is "
                    f"solved for targets up to {MAX_SOLVED_TARGET}, not {args.target}"
                )
            return best_response(args, model)
        opponent = load_player(args.opponent, args.trusted)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        with tqdm(total=args.matches, unit="match", disable=not args.progress, leave=False) as bar:
            result = evaluate(
                model,
                opponent,
                args.matches,
                seed=args.seed,
                target=args.target,
                keep_records=args.record is not None,
                progress=lambda n: bar.update(n - bar.n),
            )
    except PolicyError as error:  # a policy that broke while it played: its file, in a sentence
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.model} against {args.opponent}, seed {args.seed}")
    print(result.summary())
    try:
        if args.json is not None:
            figures = {
                "model": args.model,
                "opponent": args.opponent,
                "seed": args.seed,
                "target": args.target,
                **result.to_dict(),
            }
            write_output(args.json, (json.dumps(figures, indent=2) + "\n").encode())
            print(f"figures written to {args.json}")
        if args.record is not None:
            count = write_records(args.record, result.records)
            print(f"{count} match records written to {args.record}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: cannot write {args.record} ({reason(error)})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_cli(main)
