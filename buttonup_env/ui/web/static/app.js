// The page: three modes over one board. Play (you against a bot or policy), Watch (two players
// at a chosen speed, pause and step) and Replay (a record from --records, back and forth).
// The server keeps the games and knows the rules; every move comes back as events carrying the
// position after them, which this page animates button by button.

import { NAMES, chips, drawBoard, signed } from "./board.js";

const $ = (id) => document.getElementById(id);
const SPEEDS = {
  // milliseconds per button sown, and between two moves when watching
  slow: [550, 1100],
  normal: [280, 600],
  fast: [110, 250],
  off: [0, 0],
};
const MODES = ["play", "watch", "replay"];
const RECORDS_PAGE = 100; // records listed at a time (the server lists at most 500)

class ApiError extends Error {}

const ui = {
  mode: "play",
  options: null,
  busy: false,
  ctx: {
    play: { game: null, shown: null, log: [], anim: null, hints: null },
    watch: { game: null, shown: null, log: [], anim: null, hints: null },
    replay: { game: null, shown: null, log: [], anim: null, hints: null, data: null, pos: 0 },
  },
  watch: { token: 0, paused: false, running: false },
  records: { start: 0, total: 0 },
};

// --- the server ------------------------------------------------------------------------------
async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError("The server cannot be reached: is buttonup-web still running?");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(data.detail || `The server answered ${response.status}.`);
  }
  return data;
}

// --- small helpers ---------------------------------------------------------------------------
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const speed = () => SPEEDS[$("speed").value] || SPEEDS.normal;
const current = () => ui.ctx[ui.mode];

function say(text) {
  $("announce").textContent = text;
}

function problem(text) {
  const box = $("problem");
  box.textContent = text || "";
  box.hidden = !text;
}

function setBusy(busy) {
  ui.busy = busy;
  render();
}

function humanColor(game) {
  if (!game) return null;
  const humans = ["R", "B"].filter((c) => game.players[c].human);
  return humans.length === 1 ? humans[0] : null;
}

function isHumanTurn(ctx) {
  const game = ctx.game;
  const state = ctx.shown;
  return Boolean(
    game && state && !ui.busy && !ctx.anim && !state.round_over &&
      game.players[state.to_move].human && ctx === ui.ctx.play,
  );
}

// --- drawing ---------------------------------------------------------------------------------
function caption(ctx) {
  const state = ctx.shown;
  if (!state) return ["", ""];
  if (ctx.anim) return [`${NAMES[ctx.anim.mover]} sows`, `from slot ${ctx.anim.slot}`];
  if (state.match_over) return [`${NAMES[state.winner]} wins`, "the match"];
  if (state.round_over) return [`Round ${state.round}`, "is over"];
  if (isHumanTurn(ctx)) return ["Your turn", `lift a stack (${NAMES[state.to_move]})`];
  return [`${NAMES[state.to_move]} to move`, `move ${state.moves_played + 1} of 8`];
}

function turnText(ctx) {
  const state = ctx.shown;
  const game = ctx.game;
  if (!state) return "";
  if (state.match_over) {
    const you = humanColor(game);
    const verdict = you ? (state.winner === you ? " You win!" : " You lose.") : "";
    return `Match over: ${NAMES[state.winner]} wins ${state.score[state.winner]} - ` +
      `${state.score[state.winner === "R" ? "B" : "R"]}.${verdict}`;
  }
  if (state.round_over) return `Round ${state.round} is over.`;
  if (game && game.players[state.to_move].human && humanColor(game)) {
    return `Your turn (${NAMES[state.to_move]}).`;
  }
  const who = game ? ` (${game.players[state.to_move].label})` : "";
  return `${NAMES[state.to_move]}${who} to move.`;
}

function render() {
  const ctx = current();
  const state = ctx.shown;
  const game = ctx.game;
  const board = ctx.anim ? ctx.anim.board : state ? state.board : Array(9).fill("");
  const humanTurn = isHumanTurn(ctx);
  drawBoard($("board"), {
    board,
    legal: new Set(!ctx.anim && state ? state.legal : []),
    clickable: humanTurn,
    focus: ctx.anim ? ctx.anim.focus : null,
    hints: humanTurn && $("hint").checked ? ctx.hints : null,
    hand: ctx.anim ? ctx.anim.hand : "",
    caption: caption(ctx),
    onSlot: lift,
    onOther: (slot) => humanTurn && notLiftable(slot),
  });

  // the score and the turn
  const you = humanColor(game);
  for (const color of ["R", "B"]) {
    let name = NAMES[color];
    if (game) name += color === you ? " (you)" : `: ${game.players[color].label}`;
    $(`name-${color}`).textContent = name;
    $(`score-${color}`).textContent = state ? state.score[color] : 0;
  }
  $("target").textContent = state ? state.target : "-";
  $("round").textContent = state ? state.round : "-";
  $("move").textContent = state ? Math.min(state.moves_played + (state.round_over ? 0 : 1), 8) : "-";
  $("turn").textContent = turnText(ctx);

  // the end of a round
  const result = $("result");
  result.hidden = !(state && state.round_over && state.final && !ctx.anim);
  if (!result.hidden) {
    const final = state.final;
    $("final-stack").replaceChildren(chips(final.stack));
    $("strengths").textContent =
      `Strength: Red ${final.strength.R}, Black ${final.strength.B}.`;
    const scorer = final.points.R ? "R" : final.points.B ? "B" : null;
    $("points").textContent = scorer
      ? `${NAMES[scorer]} scores ${final.points[scorer]} point${final.points[scorer] === 1 ? "" : "s"}.`
      : "Equal strength: nobody scores.";
  }

  // hints
  const hintText = $("hint-text");
  hintText.hidden = !(humanTurn && $("hint").checked && ctx.hintText);
  hintText.textContent = hintText.hidden ? "" : ctx.hintText;

  // the mode's buttons
  $("next-round").hidden = !(ui.mode === "play" && game && state?.round_over && !state.match_over);
  $("next-round").disabled = ui.busy || Boolean(ctx.anim);
  $("play-again").hidden = !(ui.mode === "play" && state?.match_over);
  $("play-again").disabled = ui.busy;
  const watching = ui.ctx.watch.game && !ui.ctx.watch.shown?.match_over;
  $("watch-pause").disabled = !watching;
  $("watch-pause").textContent = ui.watch.paused ? "Resume" : "Pause";
  $("watch-pause").setAttribute("aria-pressed", String(ui.watch.paused));
  $("watch-step").disabled = !(watching && ui.watch.paused && !ui.busy);
  const rp = ui.ctx.replay;
  const events = rp.data ? rp.data.events : [];
  $("replay-first").disabled = !rp.data || rp.pos === 0 || ui.busy;
  $("replay-prev").disabled = !rp.data || rp.pos === 0 || ui.busy;
  $("replay-next").disabled = !rp.data || rp.pos >= events.length - 1 || ui.busy;
  $("replay-last").disabled = !rp.data || rp.pos >= events.length - 1 || ui.busy;
  $("replay-pos").textContent = rp.data ? `${rp.pos + 1} / ${events.length}` : "";

  $("start-play").disabled = ui.busy;

  // what tests and people can read off the page
  document.body.dataset.phase = phase(ctx);
  document.body.dataset.gameId = game ? game.id : "";
}

function phase(ctx) {
  const state = ctx.shown;
  if (!ui.options) return "loading";
  if (ui.busy || ctx.anim) return "busy";
  if (!state) return "idle";
  if (state.match_over) return "match-over";
  if (state.round_over) return "round-over";
  return isHumanTurn(ctx) ? "your-turn" : "waiting";
}

function renderLog() {
  const ctx = current();
  const items = ctx.log.map((entry) => {
    const li = document.createElement("li");
    li.className = `log-${entry.kind}`;
    li.textContent = entry.text;
    return li;
  });
  const log = $("log");
  log.replaceChildren(...items);
  log.scrollTop = log.scrollHeight;
}

// --- events: what the server says happened, shown one by one ---------------------------------
async function animateMove(ctx, event) {
  const move = event.move;
  const [perButton] = speed();
  if (perButton > 0) {
    const board = [...ctx.shown.board];
    board[move.slot] = "";
    let hand = move.lifted;
    ctx.anim = { board, hand, focus: move.slot, mover: move.mover, slot: move.slot };
    render();
    await sleep(perButton);
    for (const drop of move.drops) {
      board[drop.slot] += drop.buttons;
      hand = hand.slice(drop.buttons.length);
      ctx.anim = { ...ctx.anim, board: [...board], hand, focus: drop.slot };
      render();
      await sleep(perButton);
    }
    ctx.anim = null;
  }
  ctx.shown = event.state;
}

/** Say what matters about `event`: an extra turn, who starts, who scores, who wins. */
function announce(event) {
  if (event.kind === "move") {
    say(event.move.extra_turn ? `${NAMES[event.move.mover]} moves again: extra turn!` : "");
  } else if (event.kind === "round_end") {
    say(event.text.split("\n")[2].trim()); // "Red scores 3 points."
  } else {
    say(event.text);
  }
}

async function showEvents(ctx, events) {
  for (const event of events) {
    if (event.kind === "move") await animateMove(ctx, event);
    ctx.shown = event.state;
    announce(event);
    ctx.log.push({ kind: event.kind, text: event.text });
    if (ctx === current()) renderLog();
    render();
  }
}

async function refreshHints(ctx) {
  ctx.hints = null;
  ctx.hintText = "";
  if (!$("hint").checked || !isHumanTurn(ctx)) return;
  try {
    const hint = await api("GET", `/api/games/${ctx.game.id}/hint`);
    ctx.hints = new Map(hint.moves.map((m) => [m.slot, m]));
    ctx.hintText = hint.text;
  } catch (error) {
    problem(error.message);
  }
}

/** Run a request that changes `ctx`'s game, then show what happened; false if refused. */
async function act(ctx, request) {
  if (ui.busy) return false;
  problem("");
  setBusy(true);
  let done = false;
  try {
    const view = await request();
    ctx.game = view;
    if (!ctx.shown && view.events.length) ctx.shown = view.events[0].state;
    await showEvents(ctx, view.events);
    ctx.shown = view.state;
    done = true;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    problem(error.message);
  } finally {
    ctx.anim = null;
    setBusy(false);
  }
  await refreshHints(ctx);
  render();
  return done;
}

// --- play ------------------------------------------------------------------------------------
function startPlay() {
  if (ui.busy) return;
  const ctx = ui.ctx.play;
  const opponent = $("opponent").value;
  const color = document.querySelector("input[name=color]:checked").value;
  const target = Number($("target-play").value);
  const body = color === "R"
    ? { red: "human", black: opponent, target }
    : { red: opponent, black: "human", target };
  ctx.game = null;
  ctx.shown = null;
  ctx.log = [];
  say("");
  renderLog();
  return act(ctx, () => api("POST", "/api/games", body));
}

function lift(slot) {
  const ctx = ui.ctx.play;
  if (!isHumanTurn(ctx)) return;
  if (!ctx.shown.legal.includes(slot)) {
    notLiftable(slot);
    return;
  }
  act(ctx, () => api("POST", `/api/games/${ctx.game.id}/moves`, { slot }));
}

function notLiftable(slot) {
  const state = ui.ctx.play.shown;
  const why = state.board[slot] ? "holds no white button" : "is empty";
  problem(`Slot ${slot} ${why}; the legal slots are ${state.legal.join(", ")}.`);
}

function nextRound() {
  const ctx = ui.ctx.play;
  if (ctx.game) act(ctx, () => api("POST", `/api/games/${ctx.game.id}/next-round`));
}

// --- watch -----------------------------------------------------------------------------------
async function startWatch() {
  const ctx = ui.ctx.watch;
  ui.watch.token += 1;
  const token = ui.watch.token;
  while (ui.busy) await sleep(50); // a step under way finishes first
  ctx.game = null;
  ctx.shown = null;
  ctx.log = [];
  ui.watch.paused = false;
  say("");
  renderLog();
  const body = {
    red: $("watch-red").value,
    black: $("watch-black").value,
    target: Number($("target-watch").value),
  };
  await act(ctx, () => api("POST", "/api/games", body));
  watchLoop(token);
}

async function watchStep() {
  const ctx = ui.ctx.watch;
  if (!ctx.game || !ctx.shown || ctx.shown.match_over) return false;
  const action = ctx.shown.round_over ? "next-round" : "step";
  return act(ctx, () => api("POST", `/api/games/${ctx.game.id}/${action}`));
}

async function watchLoop(token) {
  const ctx = ui.ctx.watch;
  while (token === ui.watch.token && !ui.watch.paused && ctx.game && !ctx.shown.match_over) {
    if (ui.mode !== "watch") {
      ui.watch.paused = true; // leaving the mode pauses the game
      break;
    }
    const [, between] = speed();
    await sleep(ctx.shown.round_over ? between * 2 : between);
    if (token !== ui.watch.token || ui.watch.paused) break;
    if (!(await watchStep())) {
      ui.watch.paused = true; // a refused step (e.g. the game was dropped) stops the loop
      break;
    }
    if (!between) await sleep(0); // let the page draw
  }
  render();
}

function togglePause() {
  ui.watch.paused = !ui.watch.paused;
  render();
  if (!ui.watch.paused) watchLoop(ui.watch.token);
}

// --- replay ----------------------------------------------------------------------------------
async function openRecord() {
  const ctx = ui.ctx.replay;
  const index = $("record").value;
  if (index === "") return;
  problem("");
  setBusy(true);
  try {
    ctx.data = await api("GET", `/api/records/${index}`);
    showReplayAt(0);
    say(ctx.data.summary);
  } catch (error) {
    problem(error.message);
  } finally {
    setBusy(false);
  }
}

function showReplayAt(pos) {
  const ctx = ui.ctx.replay;
  ctx.pos = pos;
  ctx.shown = ctx.data.events[pos].state;
  announce(ctx.data.events[pos]);
  ctx.log = ctx.data.events.slice(0, pos + 1).map((e) => ({ kind: e.kind, text: e.text }));
  renderLog();
  render();
}

async function replayStep(delta) {
  const ctx = ui.ctx.replay;
  if (!ctx.data || ui.busy) return;
  const pos = Math.max(0, Math.min(ctx.data.events.length - 1, ctx.pos + delta));
  if (pos === ctx.pos) return;
  const event = ctx.data.events[pos];
  if (delta === 1 && event.kind === "move") {
    setBusy(true);
    try {
      await animateMove(ctx, event);
    } finally {
      ctx.anim = null;
      setBusy(false);
    }
  }
  showReplayAt(pos);
}

// --- modes and set-up ------------------------------------------------------------------------
function setMode(mode) {
  ui.mode = mode;
  for (const m of MODES) {
    $(`mode-${m}`).setAttribute("aria-pressed", String(m === mode));
    $(`setup-${m}`).hidden = m !== mode;
    $(`actions-${m}`).hidden = m !== mode;
  }
  $("keys").textContent = {
    play: "Lift a stack holding a white button (dashed ring): click it or press its number; " +
      "N starts the next round.",
    watch: "P pauses or resumes, N plays one move while paused.",
    replay: "Left and right arrow keys step back and forward.",
  }[mode];
  problem("");
  say("");
  if (mode === "watch" && ui.ctx.watch.game && ui.watch.paused) say("Paused.");
  renderLog();
  render();
}

function fillPlayers(select, players, chosen) {
  select.replaceChildren(
    ...players.map((p) => {
      const option = document.createElement("option");
      option.value = p.key;
      option.textContent = p.elo == null ? p.label : `${p.label} (Elo ${Math.round(p.elo)})`;
      option.selected = p.key === chosen;
      return option;
    }),
  );
}

async function loadOptions() {
  const options = await api("GET", "/api/options");
  ui.options = options;
  fillPlayers($("opponent"), options.players, options.default_opponent);
  fillPlayers($("watch-red"), options.players, options.default_opponent);
  const other = options.players.find((p) => p.key !== options.default_opponent) || options.players[0];
  fillPlayers($("watch-black"), options.players, other.key);
  for (const id of ["target-play", "target-watch"]) {
    $(id).max = options.max_target;
    $(id).value = options.default_target;
  }
  $("notes").replaceChildren(
    ...options.notes.map((note) => {
      const li = document.createElement("li");
      li.textContent = `Note: ${note}.`;
      return li;
    }),
  );
  await loadRecords(0);
}

/** List the records from `start` on, a page at a time (the server may offer thousands). */
async function loadRecords(start) {
  const page = ui.options.records
    ? await api("GET", `/api/records?start=${start}&count=${RECORDS_PAGE}`)
    : { start: 0, total: 0, records: [] };
  ui.records = { start: page.start, total: page.total };
  $("record").replaceChildren(
    ...page.records.map((r) => {
      const option = document.createElement("option");
      option.value = r.index;
      option.textContent = r.summary;
      return option;
    }),
  );
  const none = page.records.length === 0;
  $("no-records").hidden = page.total > 0;
  $("record").disabled = none;
  $("open-record").disabled = none;
  $("record-pages").hidden = page.total <= RECORDS_PAGE;
  const last = page.start + page.records.length;
  $("records-shown").textContent = `records ${page.start + 1} to ${last} of ${page.total}`;
  $("records-earlier").disabled = page.start === 0;
  $("records-later").disabled = last >= page.total;
}

async function pageRecords(delta) {
  const start = Math.max(0, ui.records.start + delta * RECORDS_PAGE);
  problem("");
  try {
    await loadRecords(start);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    problem(error.message);
  }
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const tag = event.target.tagName;
  if (["INPUT", "SELECT", "TEXTAREA"].includes(tag)) return;
  if (ui.mode === "play" && /^[0-8]$/.test(event.key)) {
    event.preventDefault();
    lift(Number(event.key));
  } else if (ui.mode === "play" && event.key.toLowerCase() === "n" && !$("next-round").hidden) {
    nextRound();
  } else if (ui.mode === "replay" && event.key === "ArrowRight") {
    event.preventDefault();
    replayStep(1);
  } else if (ui.mode === "replay" && event.key === "ArrowLeft") {
    event.preventDefault();
    replayStep(-1);
  } else if (ui.mode === "watch" && event.key.toLowerCase() === "p") {
    togglePause();
  } else if (ui.mode === "watch" && event.key.toLowerCase() === "n" && ui.watch.paused) {
    watchStep();
  }
}

async function main() {
  for (const m of MODES) $(`mode-${m}`).addEventListener("click", () => setMode(m));
  $("setup-play").addEventListener("submit", (event) => {
    event.preventDefault();
    startPlay();
  });
  $("setup-watch").addEventListener("submit", (event) => {
    event.preventDefault();
    startWatch();
  });
  $("setup-replay").addEventListener("submit", (event) => {
    event.preventDefault();
    openRecord();
  });
  $("records-earlier").addEventListener("click", () => pageRecords(-1));
  $("records-later").addEventListener("click", () => pageRecords(1));
  $("next-round").addEventListener("click", nextRound);
  $("play-again").addEventListener("click", startPlay);
  $("watch-pause").addEventListener("click", togglePause);
  $("watch-step").addEventListener("click", watchStep);
  $("replay-first").addEventListener("click", () => ui.ctx.replay.data && showReplayAt(0));
  $("replay-prev").addEventListener("click", () => replayStep(-1));
  $("replay-next").addEventListener("click", () => replayStep(1));
  $("replay-last").addEventListener("click", () => {
    const data = ui.ctx.replay.data;
    if (data) showReplayAt(data.events.length - 1);
  });
  $("hint").addEventListener("change", async () => {
    await refreshHints(ui.ctx.play);
    render();
  });
  document.addEventListener("keydown", onKey);
  render();
  try {
    await loadOptions();
  } catch (error) {
    problem(error.message);
    return;
  }
  render();
  await startPlay();
}

main();
