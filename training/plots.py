"""Pictures of training: matplotlib drawing into files only, the learning curve of a run's
periodic evaluations (``learning_curve.png``), and the picture of an audit
(``training/evaluate.py --audit --plot``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from buttonup_env.players.audit import Audit
from buttonup_env.ui.cli import write_output
from training.runfolder import EVAL_BOTS, EvalRow


def regret_ticks(regrets: list[float]) -> list[float]:
    """The labelled ticks of a learning curve's log regret axis: 1-2-5 steps from 0.002 to 2,
    those within a factor of 2 of the regrets plotted (a fixed list would leave the lower part
    of a good run's curve unlabelled, and ``set_yticks`` widens the axis to any tick outside
    the data)."""
    positive = [r for r in regrets if r > 0]
    low, high = min(positive, default=0.05), max(positive, default=2)
    steps = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)
    return [t for t in steps if low / 2 < t < 2 * high]


def pyplot() -> Any:
    """matplotlib's ``pyplot`` drawing into files only (the Agg backend: no window, no display
    needed), imported when the first figure is drawn, so that the scripts start without it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (written by the caller through a checked path; the
    figure is closed)."""
    plt = pyplot()

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as the PNG ``path`` (atomically; ``ValueError`` in one
    sentence when it cannot be written)."""
    write_output(path, figure_png(fig))


def learning_curve(rows: list[EvalRow], title: str = "") -> bytes | None:
    """Win rates against the bots, the round regret and (rows that have it) the match regret
    against the perfect bot over steps, as PNG bytes, from the periodic evaluations ``rows``;
    None when there are none."""
    if not rows:
        return None
    plt = pyplot()

    steps = [row.steps / 1e6 for row in rows]
    match = [(s, row.match_regret_perfect) for s, row in zip(steps, rows, strict=True)]
    match = [(s, r) for s, r in match if r is not None]
    panels = 3 if match else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.8), dpi=100)
    left, right = axes[0], axes[1]
    colours = ("tab:green", "tab:orange", "tab:red")
    for name, colour in zip(EVAL_BOTS, colours, strict=True):
        left.plot(
            steps,
            [100 * row.win_rate(name) for row in rows],
            marker=".",
            color=colour,
            label=f"against {name}",
        )
    left.set(
        xlabel="environment steps (millions)",
        ylabel="matches won (%)",
        ylim=(-2, 102),
        title="win rate in periodic evaluations",
    )
    left.axhline(50, color="grey", lw=0.6, ls=":")
    left.legend(loc="center right", fontsize=8)
    right.plot(steps, [row.regret_perfect for row in rows], marker=".", color="tab:blue")
    right.set(
        xlabel="environment steps (millions)",
        ylabel="round points per decision",
        title="mean regret against the solver (matches vs perfect)",
        yscale="log",
    )
    ticks = regret_ticks([row.regret_perfect for row in rows])
    right.set_yticks(ticks, [f"{t:g}" for t in ticks])
    right.minorticks_off()
    right.axhline(0.1, color="grey", lw=0.6, ls=":")
    right.grid(True, lw=0.3)
    if match:
        axes[2].plot(*zip(*match, strict=True), marker=".", color="tab:purple")
        axes[2].set(
            xlabel="environment steps (millions)",
            ylabel="probability of winning per decision",
            title="mean match regret (matches vs perfect)",
            yscale="symlog" if min(r for _, r in match) == 0 else "log",
        )
        axes[2].grid(True, lw=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return figure_png(fig)


def audit_picture(found: Audit, title: str = "") -> bytes:
    """The picture of an audit, as PNG bytes. At several scores: the mean loss of winning
    probability per real choice by score (a heat map, Red's points up, Black's across; blank
    where not audited) beside the mean loss by move number. At one score: the mean loss by
    move number beside the share of non-optimal choices by move, for the match and for the
    round."""
    plt = pyplot()

    moves = sorted(found.by_move)
    loss = [found.by_move[m].mean_loss for m in moves]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=100)
    by_move = right if len(found.by_score) > 1 else left
    by_move.bar(moves, loss, color="tab:purple")
    by_move.set(
        xlabel="move of the round",
        ylabel="probability of winning lost per choice",
        title="mean loss by move number",
        xticks=moves,
    )
    by_move.grid(True, axis="y", lw=0.3)
    if len(found.by_score) > 1:
        table = found.loss_by_score()
        image = left.imshow(table, origin="lower", cmap="magma_r", interpolation="nearest")
        left.set(
            xlabel="Black's points",
            ylabel="Red's points",
            title="mean loss per real choice by score (both starters)",
        )
        ticks = range(0, found.target, 2 if found.target > 8 else 1)
        left.set(xticks=ticks, yticks=ticks)
        fig.colorbar(image, ax=left, label="probability of winning lost per choice")
    else:
        width = 0.4
        for shift, (name, share) in zip(
            (-width / 2, width / 2),
            (
                ("the match", [found.by_move[m].wrong / found.by_move[m].choices for m in moves]),
                (
                    "the round",
                    [found.by_move[m].wrong_round / found.by_move[m].choices for m in moves],
                ),
            ),
            strict=True,
        ):
            right.bar([m + shift for m in moves], [100 * x for x in share], width, label=name)
        right.set(
            xlabel="move of the round",
            ylabel="non-optimal choices (%)",
            title="non-optimal choices by move number",
            xticks=moves,
        )
        right.legend(fontsize=8, title="non-optimal for", title_fontsize=8)
        right.grid(True, axis="y", lw=0.3)
    t = found.total
    fig.suptitle(
        (f"{title}: " if title else "")
        + f"{t.choices:,} real choices, {t.wrong:,.0f} non-optimal for the match, mean loss "
        f"{t.mean_loss:.6f}",
        fontsize=10,
    )
    fig.tight_layout()
    return figure_png(fig)
