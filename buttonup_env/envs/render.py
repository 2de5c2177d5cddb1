"""Pictures of a position: text (``ansi``) and an RGB image of the circle (``rgb_array``).

Only numpy: the image is drawn with filled discs and a tiny built-in bitmap font, in the few
flat colours of :data:`RGB` (no anti-aliasing), so a picture converts to a palette without loss.
:class:`HumanRenderer` shows positions to a person (``render_mode="human"``): that picture in
a window when pygame is installed, the text board otherwise.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..game.rules import NUM_SLOTS, Color, State

COLOR_NAMES = {"R": "Red", "B": "Black"}

# --- text ------------------------------------------------------------------------------------

ANSI_COLORS = {"R": "\x1b[1;31m", "B": "\x1b[1;34m", "W": "\x1b[1;37m"}
ANSI_RESET = "\x1b[0m"


def paint(stack: str, color: bool) -> str:
    """A stack's letters, each in its colour when ``color`` is set."""
    if not color:
        return stack
    return "".join(f"{ANSI_COLORS[b]}{b}{ANSI_RESET}" for b in stack)


def ansi(
    state: State, agent_color: Color | None = None, color: bool = False, mark_legal: bool = True
) -> str:
    """A readable text board: one line a slot (stack bottom to top), the score and the turn."""
    legal = set(state.legal_moves()) if mark_legal else set()
    score = state.score
    you = {c: " (you)" if c == agent_color else "" for c in ("R", "B")}
    lines = [
        f"Button Up!  Red{you['R']} {score['R']} - {score['B']} Black{you['B']}"
        f"   target {state.target}",
    ]
    for slot, stack in enumerate(state.board):
        mark = "  <- legal" if slot in legal else ""
        shown = paint(stack, color) if stack else "."
        lines.append(f"  slot {slot}: {shown}{mark}")
    if state.round_over:
        s = state.strength
        lines.append(
            f"Round over: strength Red {s['R']}, Black {s['B']}; points "
            f"Red {state.round_points['R']}, Black {state.round_points['B']}"
        )
        if state.match_over:
            lines.append(f"Match over: {COLOR_NAMES[state.winner]} wins.")  # type: ignore[index]
    else:
        lines.append(f"{COLOR_NAMES[state.to_move]} to move (move {state.moves_played + 1} of 8)")
    return "\n".join(lines) + "\n"


# --- pictures --------------------------------------------------------------------------------

RGB = {
    "R": (200, 40, 40),
    "B": (30, 30, 30),
    "W": (245, 245, 245),
    "background": (222, 198, 150),
    "ring": (160, 130, 90),
    "outline": (90, 70, 50),
    "text": (40, 30, 20),
    "highlight": (255, 215, 0),
    "legal": (60, 140, 60),
    "caption": (236, 220, 186),
}
"""The only colours :func:`rgb_array` and :func:`caption` draw with."""

# 3x5 bitmap glyphs, rows top to bottom
_FONT = {
    "0": ("111", "101", "101", "101", "111"),
    "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"),
    "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"),
    "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"),
    "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"),
    "9": ("111", "101", "111", "001", "111"),
    "R": ("110", "101", "110", "101", "101"),
    "B": ("110", "101", "110", "101", "110"),
    "-": ("000", "000", "111", "000", "000"),
    "/": ("001", "001", "010", "100", "100"),
    " ": ("000", "000", "000", "000", "000"),
    "A": ("010", "101", "111", "101", "101"),
    "C": ("011", "100", "100", "100", "011"),
    "D": ("110", "101", "101", "101", "110"),
    "E": ("111", "100", "110", "100", "111"),
    "F": ("111", "100", "110", "100", "100"),
    "G": ("011", "100", "101", "101", "011"),
    "H": ("101", "101", "111", "101", "101"),
    "I": ("111", "010", "010", "010", "111"),
    "J": ("001", "001", "001", "101", "010"),
    "K": ("101", "101", "110", "101", "101"),
    "L": ("100", "100", "100", "100", "111"),
    "M": ("101", "111", "111", "101", "101"),
    "N": ("110", "101", "101", "101", "101"),
    "O": ("010", "101", "101", "101", "010"),
    "P": ("110", "101", "110", "100", "100"),
    "Q": ("010", "101", "101", "110", "011"),
    "S": ("011", "100", "010", "001", "110"),
    "T": ("111", "010", "010", "010", "010"),
    "U": ("101", "101", "101", "101", "111"),
    "V": ("101", "101", "101", "101", "010"),
    "W": ("101", "101", "111", "111", "101"),
    "X": ("101", "101", "010", "101", "101"),
    "Y": ("101", "101", "010", "010", "010"),
    "Z": ("111", "001", "010", "100", "111"),
    ":": ("000", "010", "000", "010", "000"),
    ".": ("000", "000", "000", "000", "010"),
    ",": ("000", "000", "000", "010", "100"),
    "!": ("010", "010", "010", "000", "010"),
    "(": ("001", "010", "010", "010", "001"),
    ")": ("100", "010", "010", "010", "100"),
    "+": ("000", "010", "111", "010", "000"),
    "=": ("000", "111", "000", "111", "000"),
    ">": ("100", "010", "001", "010", "100"),
    "<": ("001", "010", "100", "010", "001"),
    "'": ("010", "010", "000", "000", "000"),
}
"""3x5 glyphs: digits, capital letters (lower case is drawn as capitals) and a few signs."""


def _text(
    img: np.ndarray, text: str, x: int, y: int, scale: int, rgb: tuple[int, int, int]
) -> None:
    """Draw ``text`` with its top-left corner at (x, y); each glyph takes ``4 * scale`` pixels."""
    for k, ch in enumerate(text.upper()):
        glyph = _FONT.get(ch, _FONT[" "])
        gx = x + k * 4 * scale
        for r, row in enumerate(glyph):
            for c, bit in enumerate(row):
                if bit == "1":
                    y0, x0 = y + r * scale, gx + c * scale
                    img[max(y0, 0) : y0 + scale, max(x0, 0) : x0 + scale] = rgb


def _disc(img: np.ndarray, cx: float, cy: float, r: float, rgb: tuple[int, int, int]) -> None:
    h, w = img.shape[:2]
    y0, y1 = max(int(cy - r), 0), min(int(cy + r) + 1, h)
    x0, x1 = max(int(cx - r), 0), min(int(cx + r) + 1, w)
    yy, xx = np.ogrid[y0:y1, x0:x1]
    inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    img[y0:y1, x0:x1][inside] = rgb


def _ring(
    img: np.ndarray, cx: float, cy: float, r: float, width: float, rgb: tuple[int, int, int]
) -> None:
    h, w = img.shape[:2]
    yy, xx = np.ogrid[0:h, 0:w]
    d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
    img[np.abs(d - r) <= width / 2] = rgb


def _polar(slot: int, radius: float, size: int) -> tuple[float, float]:
    """Pixel (x, y) at ``radius`` from the centre in the direction of ``slot``."""
    angle = 2 * math.pi * slot / NUM_SLOTS
    return size / 2 + radius * math.sin(angle), size / 2 - radius * math.cos(angle)


def rgb_array(
    state: State,
    last_move: int | None = None,
    size: int = 400,
    *,
    highlight: Mapping[int, int] | None = None,
) -> np.ndarray:
    """An ``size x size x 3`` uint8 picture: the circle of slots with every stack on it.

    Slot 0 is at the top and the numbers grow clockwise, as in the rules. Each stack is a row of
    buttons from its slot on the circle towards the centre, the bottom button on the circle.
    Legal slots sit on a green base; ``last_move`` (the slot just lifted) is ringed in gold. The
    score is at the top left (red, then black), the target at the top right, and a button of
    the colour to move at the bottom right (labelled in words from ``size`` 300 up).

    ``highlight`` maps slots to a number of buttons: that many buttons at the top of the slot's
    stack are ringed in gold (the stack about to be lifted, or the buttons just sown).
    """
    marked = dict(highlight or {})
    img = np.empty((size, size, 3), dtype=np.uint8)
    img[:] = RGB["background"]
    ring_r = size * 0.38
    _ring(img, size / 2, size / 2, ring_r, max(size // 100, 2), RGB["ring"])
    legal = set(state.legal_moves())
    button_r = size * 0.026
    rim = max(size / 250, 1)
    halo = max(size / 90, 2)
    scale = max(size // 130, 2)
    for slot, stack in enumerate(state.board):
        cx, cy = _polar(slot, ring_r, size)
        base = RGB["legal"] if slot in legal else RGB["ring"]
        _disc(img, cx, cy, size * 0.045, RGB["outline"])
        _disc(img, cx, cy, size * 0.038, base)
        if slot == last_move:
            _ring(img, cx, cy, size * 0.052, max(size // 130, 2), RGB["highlight"])
        lx, ly = _polar(slot, size * 0.465, size)
        _text(img, str(slot), int(lx - 1.5 * scale), int(ly - 2.5 * scale), scale, RGB["text"])
        lit = len(stack) - min(marked.get(slot, 0), len(stack))
        for k, button in enumerate(stack):
            bx, by = _polar(slot, ring_r - k * button_r * 1.6, size)
            if k >= lit:
                _disc(img, bx, by, button_r + rim + halo, RGB["highlight"])
            _disc(img, bx, by, button_r + rim, RGB["outline"])
            _disc(img, bx, by, button_r, RGB[button])
    score = state.score
    wide = size >= 300  # room for words; smaller pictures keep to letters and numbers
    red, black = ("Red", "Black") if wide else ("R", "B")
    _text(img, f"{red} {score['R']}", 6, 6, scale, RGB["R"])
    _text(img, f"{black} {score['B']}", 6, 6 + 7 * scale, scale, RGB["B"])
    target = f"target {state.target}" if wide else str(state.target)
    _text(img, target, size - 6 - 4 * scale * len(target), 6, scale, RGB["text"])
    if not state.round_over:
        cx = cy = size - size * 0.06
        _disc(img, cx, cy, size * 0.035, RGB["outline"])
        _disc(img, cx, cy, size * 0.03, RGB[state.to_move])
        if wide:
            label = "to move"
            x = size - 6 - 4 * scale * len(label)
            _text(img, label, x, int(cy - size * 0.035 - 8 * scale), scale, RGB["text"])
    return img


def caption(
    image: np.ndarray,
    lines: Sequence[str | Sequence[tuple[str, tuple[int, int, int]]]],
    scale: int | None = None,
) -> np.ndarray:
    """``image`` with a strip beneath it holding ``lines`` of text (drawn in capitals).

    A line is a string, or a sequence of ``(text, rgb)`` pieces drawn one after another. Text
    that does not fit the width is cut off. ``scale`` (pixels per font dot) defaults to
    ``image width // 200``, at least 1.
    """
    width = image.shape[1]
    scale = max(width // 200, 1) if scale is None else scale
    pad = 3 * scale
    strip = np.empty((len(lines) * 7 * scale + 2 * pad, width, 3), dtype=np.uint8)
    strip[:] = RGB["caption"]
    strip[: max(scale // 2, 1)] = RGB["outline"]
    for row, line in enumerate(lines):
        pieces = [(line, RGB["text"])] if isinstance(line, str) else line
        x, y = pad, pad + row * 7 * scale + scale
        for text, rgb in pieces:
            _text(strip, text, x, y, scale, rgb)
            x += 4 * scale * len(text)
    return np.concatenate([image, strip], axis=0)


# --- render_mode="human" ---------------------------------------------------------------------

WINDOW_CAPTION = "Button Up!"
"""The title of the ``render_mode="human"`` window."""


class HumanRenderer:
    """Shows positions as they come, for ``render_mode="human"`` in both environments.

    With pygame installed, :meth:`show` draws the :func:`rgb_array` picture in a window of its
    size, captioned :data:`WINDOW_CAPTION`; otherwise (or when no window can be opened, as on a
    machine without a display) it prints the :func:`ansi` text board to stdout, after a one-line
    note saying why the first time. pygame is imported on the first :meth:`show`, never before.

    Frames are paced at ``fps``: a frame that comes less than ``1 / fps`` seconds after the
    previous one waits for the rest (the first frame, and a frame after a pause, never waits).
    :meth:`close` closes the window; a later :meth:`show` opens it again.
    """

    def __init__(self, fps: float, size: int = 400) -> None:
        if not fps > 0:
            raise ValueError(f"fps={fps!r} is not allowed; use a number of frames a second > 0")
        self.fps = fps
        self.size = size
        self._window = False  # True while this renderer has a window open
        self._text = False  # True once the window is out of reach: print the board instead
        self._last_frame: float | None = None  # time.monotonic() of the previous frame

    @property
    def window(self) -> bool:
        """Whether this renderer has a window open (False before the first frame, in text
        mode and after :meth:`close`)."""
        return self._window

    def show(
        self, state: State, *, last_move: int | None = None, agent_color: Color | None = None
    ) -> None:
        """Show ``state``: its picture in the window (``last_move`` ringed in gold) or its text
        board (``agent_color`` marked "you")."""
        self._wait()
        if not self._text and not self._window:
            self._open()
        if self._window:
            self._draw(rgb_array(state, last_move=last_move, size=self.size))
        else:
            print(ansi(state, agent_color=agent_color), flush=True)

    def close(self) -> None:
        """Close the window, if this renderer opened one (closing twice is fine)."""
        if self._window:
            self._window = False
            import pygame

            if pygame.display.get_init():
                pygame.display.quit()

    def _wait(self) -> None:
        now = time.monotonic()
        if self._last_frame is not None:
            due = self._last_frame + 1 / self.fps
            if now < due:
                time.sleep(due - now)
                now = due
        self._last_frame = now

    def _open(self) -> None:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no greeting on stdout
        try:
            import pygame
        except ImportError:
            self._use_text("pygame is not installed (pip install pygame shows a window)")
            return
        try:
            self._surface(pygame)
        except pygame.error as error:
            self._use_text(f"no window could be opened ({error})")
            return
        self._window = True

    def _surface(self, pygame: Any) -> Any:
        """The window's surface, opening the window if it is not (or no longer) open."""
        if pygame.display.get_init():
            screen = pygame.display.get_surface()
            if screen is not None and screen.get_size() == (self.size, self.size):
                return screen
        pygame.display.init()
        screen = pygame.display.set_mode((self.size, self.size))
        pygame.display.set_caption(WINDOW_CAPTION)
        return screen

    def _draw(self, picture: np.ndarray) -> None:
        import pygame

        screen = self._surface(pygame)  # another renderer may have closed the shared window
        pygame.surfarray.blit_array(screen, picture.swapaxes(0, 1))
        pygame.event.pump()  # keeps the window responsive
        pygame.display.flip()

    def _use_text(self, why: str) -> None:
        self._text = True
        print(f"Button Up! is shown as text: {why}.", flush=True)


class EnvRenderer:
    """``render()`` and ``close()`` of an environment, for its ``render_mode``.

    ``ButtonUp-v1`` and the PettingZoo env hold one and hand it their position:
    :meth:`render` gives the text board (``"ansi"``), the picture (``"rgb_array"``, the last
    move ringed in gold), or shows the position and gives None (``"human"``, through a
    :class:`HumanRenderer` paced at ``fps``); without a mode, or before the first position,
    None. The envs call :meth:`render` themselves after every reset and step when
    :attr:`human` is set, as Gymnasium's human mode asks.
    """

    def __init__(self, render_mode: str | None, fps: float) -> None:
        self.render_mode = render_mode
        self._human = HumanRenderer(fps) if render_mode == "human" else None

    @property
    def human(self) -> bool:
        """Whether positions are shown to a person (``render_mode="human"``)."""
        return self._human is not None

    def render(
        self, state: State | None, last_move: int | None = None, agent_color: Color | None = None
    ) -> str | np.ndarray | None:
        """``state`` in the render mode (``agent_color``: whose side the text board marks)."""
        if self.render_mode is None or state is None:
            return None
        if self._human is not None:
            self._human.show(state, last_move=last_move, agent_color=agent_color)
            return None
        if self.render_mode == "ansi":
            return ansi(state, agent_color=agent_color)
        return rgb_array(state, last_move=last_move)

    def close(self) -> None:
        """Close the window of ``render_mode="human"``, if one is open."""
        if self._human is not None:
            self._human.close()
