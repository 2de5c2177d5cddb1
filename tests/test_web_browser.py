"""The page in a real browser: headless Chromium driven by Selenium, against the real server.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; without them
the tests are skipped with a line saying how to install them (under CI they fail instead, so
that CI cannot pass without running them). ``BUTTONUP_WEB_SCREENSHOT=docs/images/web.png``
saves the README's picture of the page; otherwise it goes to pytest's temporary folder. A
browser takes seconds a test: they are slow tests (``python -m pytest -m slow``, and CI).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web app needs the web extra: pip install -e '.[web]'")

pytestmark = pytest.mark.slow

INSTALL = (
    "no headless Chromium: apt-get install chromium chromium-driver, and pip install selenium "
    "(both come with pip install -e '.[test]' and .ci/run)"
)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return INSTALL
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        return INSTALL
    return None


missing = _browser_missing()
if missing is not None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but there is {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=True)

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from buttonup_env.ui.web.app import create_app  # noqa: E402
from buttonup_env.ui.web.offered import offer  # noqa: E402
from buttonup_env.ui.web.replays import load_records  # noqa: E402
from buttonup_env.ui.web.server import listen  # noqa: E402

WAIT = 20  # seconds for anything the page does


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[tuple[str, Any]]:
    """The real server (uvicorn) on a free port of 127.0.0.1, in a thread."""
    records, _ = load_records([data_dir / "matches.jsonl"])
    ratings = {"random": 0.0, "perfect-0.25": 604.6, "perfect": 1133.2}  # greedy: none
    app = create_app(offer(["random"], levels=["perfect-0.25"], ratings=ratings), records)
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not uv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/", app
    uv.should_exit = True
    thread.join(WAIT)
    sock.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1200,920",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT, poll_frequency=0.02).until(condition, message=what)


def phase(driver: WebDriver) -> str:
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-phase") or ""


def text(driver: WebDriver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def clickable_slots(driver: WebDriver) -> dict[str, str]:
    """The slots a person may lift now, by number, with their labels (read at once)."""
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#board .slot.clickable')]"
        ".map(e => [e.dataset.slot, e.getAttribute('aria-label') || '']))"
    )


def click_pad(driver: WebDriver, slot: str) -> bool:
    """Click ``slot``'s pad; False (to be tried again) when the board was redrawn meanwhile."""
    try:
        pad = driver.find_element(By.CSS_SELECTOR, f'#board .slot[data-slot="{slot}"] .pad')
        ActionChains(driver).move_to_element(pad).click().perform()
    except StaleElementReferenceException:
        return False
    return True


def log_length(driver: WebDriver) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, "#log li"))


def console_errors(driver: WebDriver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def open_page(driver: WebDriver, url: str) -> None:
    driver.get(url)
    wait_for(driver, lambda d: phase(d) not in ("loading", "busy", ""), "the page to load")
    Select(driver.find_element(By.ID, "speed")).select_by_value("off")


def game_on_server(app: Any, game_id: str) -> Any:
    return app.state.store.get(game_id)


def test_a_match_against_the_random_bot_played_by_clicking(
    server: tuple[str, Any], browser: WebDriver, tmp_path: Path
) -> None:
    url, app = server
    open_page(browser, url)
    assert browser.title == "Button Up!"
    Select(browser.find_element(By.ID, "opponent")).select_by_value("random")
    target = browser.find_element(By.ID, "target-play")
    target.clear()
    target.send_keys("3")
    browser.find_element(By.ID, "hint").click()
    browser.find_element(By.ID, "start-play").click()

    screenshot = Path(os.environ.get("BUTTONUP_WEB_SCREENSHOT") or tmp_path / "web.png")
    shot_taken = False
    moves = rounds = 0
    while True:
        now = wait_for(
            browser,
            lambda d: (p := phase(d)) in ("your-turn", "round-over", "match-over") and p,
            "the person's turn, or the end of a round",
        )
        if now == "match-over":
            break
        if now == "round-over":
            assert "Strength: Red" in text(browser, "strengths")
            assert text(browser, "points").endswith(("points.", "point.", "nobody scores."))
            rounds += 1
            browser.find_element(By.ID, "next-round").click()
            continue
        # the hints redraw the board when they arrive: read the slots after them, in one call
        # of the page's own script, as a redraw between two reads would leave stale elements
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#board .hint"), "hints")
        legal = clickable_slots(browser)
        assert legal, "a person's turn shows the stacks that may be lifted"
        for label in legal.values():
            assert "can be lifted" in label
        assert text(browser, "hint-text").startswith("hint: slot")
        if not shot_taken and moves >= 2:
            browser.save_screenshot(str(screenshot))
            shot_taken = True
        logged = log_length(browser)
        if moves % 2:  # every other move by its digit key, the others by a click
            browser.find_element(By.TAG_NAME, "body").send_keys(min(legal))
        else:  # on the slot's pad, where its buttons lie too
            last = max(legal)
            wait_for(browser, lambda d, s=last: click_pad(d, s), "the slot's pad clicked")
        moves += 1
        wait_for(browser, lambda d, n=logged: log_length(d) > n, "the move to be played")

    game = game_on_server(
        app, browser.find_element(By.TAG_NAME, "body").get_attribute("data-game-id")
    )
    score = game.state.score
    assert text(browser, "score-R") == str(score["R"])
    assert text(browser, "score-B") == str(score["B"])
    assert max(score.values()) >= 3 and game.state.match_over
    winner = "Red" if game.state.winner == "R" else "Black"
    assert text(browser, "turn").startswith(f"Match over: {winner} wins")
    assert browser.find_element(By.ID, "play-again").is_displayed()
    log = browser.find_elements(By.CSS_SELECTOR, "#log li")
    assert log[-1].text.startswith(f"Match over: {winner} wins")
    assert sum("You lift slot" in li.text for li in log) == moves
    assert rounds == game.round - 1
    if not shot_taken:
        browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000
    assert console_errors(browser) == []


def test_the_opponents_are_listed_with_their_ratings(
    server: tuple[str, Any], browser: WebDriver
) -> None:
    url, _ = server
    open_page(browser, url)
    options = Select(browser.find_element(By.ID, "opponent")).options
    assert [o.text for o in options] == [
        "the random bot (Elo 0)",
        "the greedy bot",
        "level 1 of 1: perfect, 25% random moves (Elo 605)",
        "the perfect bot (Elo 1133)",
    ]


def test_two_bots_watched_paused_and_stepped(server: tuple[str, Any], browser: WebDriver) -> None:
    url, app = server
    open_page(browser, url)
    browser.find_element(By.ID, "mode-watch").click()
    Select(browser.find_element(By.ID, "speed")).select_by_value("fast")
    Select(browser.find_element(By.ID, "watch-red")).select_by_value("greedy")
    Select(browser.find_element(By.ID, "watch-black")).select_by_value("random")
    target = browser.find_element(By.ID, "target-watch")
    target.clear()
    target.send_keys("1")
    browser.find_element(By.ID, "start-watch").click()
    pause = browser.find_element(By.ID, "watch-pause")
    wait_for(browser, lambda d: pause.is_enabled(), "the game to start")
    pause.click()
    assert pause.text == "Resume"
    wait_for(browser, lambda d: phase(d) != "busy", "the move under way to end")
    count = len(browser.find_elements(By.CSS_SELECTOR, "#log li"))
    time.sleep(0.6)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#log li")) == count, "paused"
    browser.find_element(By.ID, "watch-step").click()
    wait_for(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#log li")) > count and phase(d) != "busy",
        "one step",
    )
    Select(browser.find_element(By.ID, "speed")).select_by_value("off")
    pause.click()  # resume
    wait_for(browser, lambda d: phase(d) == "match-over", "the end of the watched match")
    game = game_on_server(
        app, browser.find_element(By.TAG_NAME, "body").get_attribute("data-game-id")
    )
    assert text(browser, "score-R") == str(game.state.score["R"])
    assert text(browser, "score-B") == str(game.state.score["B"])
    assert "greedy" in text(browser, "name-R") and "random" in text(browser, "name-B")
    assert console_errors(browser) == []


def test_a_record_replayed_forward_and_back(server: tuple[str, Any], browser: WebDriver) -> None:
    url, _ = server
    open_page(browser, url)
    browser.find_element(By.ID, "mode-replay").click()
    Select(browser.find_element(By.ID, "record")).select_by_index(1)  # s20261129-m1: 3 rounds
    browser.find_element(By.ID, "open-record").click()
    wait_for(browser, lambda d: text(d, "replay-pos").startswith("1 / "), "the record")
    total = int(text(browser, "replay-pos").split(" / ")[1])
    forward = browser.find_element(By.ID, "replay-next")
    for _ in range(3):
        forward.click()
        wait_for(browser, lambda d: forward.is_enabled(), "the step")
    assert text(browser, "replay-pos") == f"4 / {total}"
    stacks = [
        s.get_attribute("data-stack") for s in browser.find_elements(By.CSS_SELECTOR, ".slot")
    ]
    browser.find_element(By.TAG_NAME, "body").send_keys("\ue012")  # left arrow: one back
    wait_for(browser, lambda d: text(d, "replay-pos") == f"3 / {total}", "a step back")
    back = [s.get_attribute("data-stack") for s in browser.find_elements(By.CSS_SELECTOR, ".slot")]
    assert back != stacks
    browser.find_element(By.ID, "replay-last").click()
    assert text(browser, "replay-pos") == f"{total} / {total}"
    assert (text(browser, "score-R"), text(browser, "score-B")) == ("9", "18")
    assert text(browser, "turn").startswith("Match over: Black wins 18 - 9")
    tall = [
        s for s in browser.find_elements(By.CSS_SELECTOR, ".slot") if s.get_attribute("data-stack")
    ]
    assert [len(s.get_attribute("data-stack")) for s in tall] == [9]  # the final stack
    assert hidden_slots(browser) == []
    assert console_errors(browser) == []


HIDDEN_SLOTS = """
const box = (e) => e.getBoundingClientRect();
const meets = (a, b) =>
  a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
const slots = [...document.querySelectorAll('.slot')];
const found = [];
for (const slot of slots) {
  const coins = [...slot.querySelectorAll('.coin')].map(box);
  if (!coins.length) continue;
  const own = box(slot.querySelector('.pad'));
  const s = {
    left: Math.min(...coins.map((c) => c.left)), right: Math.max(...coins.map((c) => c.right)),
    top: Math.min(...coins.map((c) => c.top)), bottom: Math.max(...coins.map((c) => c.bottom)),
  };
  if (s.left < own.left - 1 || s.right > own.right + 1 || s.top < own.top - 1
      || s.bottom > own.bottom + 1) found.push(`slot ${slot.dataset.slot} leaves its circle`);
  for (const other of slots) {
    if (other === slot) continue;
    for (const part of ['.pad', '.slot-number']) {
      if (meets(s, box(other.querySelector(part)))) {
        found.push(`slot ${slot.dataset.slot} covers ${part} of slot ${other.dataset.slot}`);
      }
    }
  }
}
return found;
"""


def hidden_slots(browser: WebDriver) -> list[str]:
    """What a drawn stack covers: another slot's circle or number, or more than its own circle."""
    return browser.execute_script(HIDDEN_SLOTS)


def test_records_are_listed_a_page_at_a_time(data_dir: Path, browser: WebDriver) -> None:
    """340 records: the list shows a hundred at a time, and Later and Earlier page through."""
    records, _ = load_records([data_dir / "rounds.jsonl", data_dir / "matches.jsonl"])
    app = create_app(offer(["random"]), records)
    sock = listen("127.0.0.1", 0)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not uv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        open_page(browser, f"http://127.0.0.1:{sock.getsockname()[1]}/")
        browser.find_element(By.ID, "mode-replay").click()
        record = Select(browser.find_element(By.ID, "record"))
        earlier = browser.find_element(By.ID, "records-earlier")
        later = browser.find_element(By.ID, "records-later")
        assert len(record.options) == 100 and record.options[0].get_attribute("value") == "0"
        assert text(browser, "records-shown") == "records 1 to 100 of 340"
        assert not earlier.is_enabled() and later.is_enabled()
        for shown in ("records 101 to 200 of 340", "records 201 to 300 of 340"):
            later.click()
            wait_for(browser, lambda d, s=shown: text(d, "records-shown") == s, shown)
        later.click()
        wait_for(browser, lambda d: text(d, "records-shown").startswith("records 301 "), "last")
        assert text(browser, "records-shown") == "records 301 to 340 of 340"
        assert len(record.options) == 40 and not later.is_enabled()
        record.select_by_value("339")  # the last match
        browser.find_element(By.ID, "open-record").click()
        wait_for(browser, lambda d: text(d, "replay-pos").startswith("1 / "), "the record")
        earlier.click()
        wait_for(browser, lambda d: text(d, "records-shown").startswith("records 201 "), "back")
        assert record.options[0].get_attribute("value") == "200"
        assert console_errors(browser) == []
    finally:
        uv.should_exit = True
        thread.join(WAIT)
        sock.close()


def test_the_page_fits_a_phone_and_names_its_controls(
    server: tuple[str, Any], browser: WebDriver
) -> None:
    url, _ = server
    browser.set_window_size(390, 844)
    try:
        open_page(browser, url)
        width = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert width[0] <= width[1], f"the page is wider than the phone: {width}"
        board = browser.find_element(By.ID, "board")
        assert board.size["width"] <= width[1]
        for button in browser.find_elements(By.TAG_NAME, "button"):
            name = button.get_attribute("textContent").strip() or button.get_attribute("aria-label")
            assert name, button.get_attribute("id")
        slots = browser.find_elements(By.CSS_SELECTOR, "#board .slot")
        assert len(slots) == 9
        for slot in slots:
            label = slot.get_attribute("aria-label") or ""
            assert label.startswith(f"Slot {slot.get_attribute('data-slot')}: ")
        letters = {t.text for t in browser.find_elements(By.CSS_SELECTOR, ".coin-letter")}
        assert letters == {"R", "B", "W"}, "each button carries its letter"
        for control in browser.find_elements(By.CSS_SELECTOR, "select, input"):
            assert control.find_elements(By.XPATH, "ancestor::label"), control.get_attribute("id")
        assert console_errors(browser) == []
    finally:
        browser.set_window_size(1200, 920)
