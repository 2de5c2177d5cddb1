// The circle of nine slots, drawn as SVG. Each stack is drawn bottom to top as buttons with
// their letter on them (R, B, W), so colour is never the only cue; legal stacks get a dashed
// ring and say so in their accessible name.

const NS = "http://www.w3.org/2000/svg";
const CX = 300; // the circle's centre in the 600 x 620 picture
const CY = 310;
const RING = 200; // radius of the slots' circle
const PAD = 50; // radius of a slot
const COIN_RX = 30;
const COIN_RY = 7;
const COIN_STEP = 14; // height of a button's rim: the part of it left in sight under the next
const STACK_ROOM = 2 * PAD - 12; // a stack stays inside its slot's circle, scaled down if tall
const LABEL_DROP = 80; // slot numbers, under their slot
const HINT_RING = 122; // hint values, inside the circle

export const NAMES = { R: "Red", B: "Black", W: "White" };

function el(name, attrs = {}, text = null) {
  const node = document.createElementNS(NS, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function polar(radius, slot) {
  const angle = ((-90 + 40 * slot) * Math.PI) / 180; // slot 0 on top, numbers grow clockwise
  return [CX + radius * Math.cos(angle), CY + radius * Math.sin(angle)];
}

/** "Red, White from the bottom" for "RW"; "empty" for "". */
export function stackWords(stack) {
  if (!stack) return "empty";
  return `${[...stack].map((b) => NAMES[b]).join(", ")} from the bottom`;
}

/** "52%" for 0.523: a probability as a whole percentage. */
export function percent(p) {
  return `${Math.round(100 * p)}%`;
}

/** "+3", "-2" or "0". */
export function signed(value) {
  return value > 0 ? `+${value}` : String(value);
}

// A button seen from the side: its top face at y, its rim below it with its letter on it, so
// that in a stack every button's letter stays in sight.
function coin(button, x, y) {
  const group = el("g", { class: `coin coin-${button}`, "aria-hidden": "true" });
  const bottom = y + COIN_STEP;
  const rim = `M ${x - COIN_RX} ${y} V ${bottom} A ${COIN_RX} ${COIN_RY} 0 0 0 ${x + COIN_RX} ` +
    `${bottom} V ${y} Z`;
  group.append(
    el("path", { class: "coin-side", d: rim }),
    el("ellipse", { class: "coin-top", cx: x, cy: y, rx: COIN_RX, ry: COIN_RY }),
    el("text", { class: "coin-letter", x, y: bottom + 4 }, button),
  );
  return group;
}

// A stack's buttons, bottom to top, centred in its slot's circle: a tall stack (the final
// stack of nine) is drawn smaller rather than over the next slot and its number.
function stackCoins(stack, x, y) {
  const group = el("g", { class: "stack" });
  const height = stack.length * COIN_STEP + 2 * COIN_RY;
  const scale = Math.min(1, STACK_ROOM / height);
  if (scale < 1) {
    group.setAttribute("transform", `translate(${x} ${y}) scale(${scale}) translate(${-x} ${-y})`);
  }
  const top = y - height / 2 + COIN_RY; // the top face of the highest button
  [...stack].forEach((button, level) => {
    group.append(coin(button, x, top + (stack.length - 1 - level) * COIN_STEP));
  });
  return group;
}

function slotGroup(slot, stack, view) {
  const [x, y] = polar(RING, slot);
  const legal = view.legal.has(slot);
  const clickable = view.clickable && legal;
  const hint = view.hints ? view.hints.get(slot) : undefined;
  const classes = ["slot"];
  if (legal) classes.push("legal");
  if (clickable) classes.push("clickable");
  if (view.focus === slot) classes.push("focus");
  let name = `Slot ${slot}: ${stackWords(stack)}`;
  if (legal) name += ", can be lifted";
  if (hint !== undefined) {
    name += `, ${percent(hint.chance)} chance of winning the match, round margin ${signed(hint.value)}`;
  }
  const group = el("g", {
    class: classes.join(" "),
    role: "button",
    "aria-label": name,
    "aria-disabled": clickable ? "false" : "true",
    tabindex: clickable ? 0 : -1,
    "data-slot": slot,
    "data-stack": stack,
  });
  group.append(el("circle", { class: "pad", cx: x, cy: y, r: PAD }));
  if (legal) group.append(el("circle", { class: "legal-ring", cx: x, cy: y, r: PAD + 7 }));
  group.append(stackCoins(stack, x, y));
  group.append(
    el("text", { class: "slot-number", x, y: y + LABEL_DROP, "aria-hidden": "true" }, slot),
  );
  if (hint !== undefined) {
    const [hx, hy] = polar(HINT_RING, slot);
    const badge = el("g", { class: `hint ${hint.best ? "hint-good" : "hint-bad"}`, "aria-hidden": "true" });
    badge.append(
      el("rect", { x: hx - 24, y: hy - 13, width: 48, height: 24, rx: 6 }),
      el("text", { x: hx, y: hy + 5 }, percent(hint.chance)),
    );
    group.append(badge);
  }
  if (clickable) {
    group.addEventListener("click", () => view.onSlot(slot));
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        view.onSlot(slot);
      }
    });
  } else if (view.onOther) {
    group.addEventListener("click", () => view.onOther(slot));
  }
  return group;
}

/**
 * Draw a board into `svg`.
 * view: { board: string[9], legal: Set, clickable: bool, focus: slot|null,
 *         hints: Map slot -> {chance, value, best} | null,
 *         hand: string (buttons being sown), caption: [string, string], onSlot(slot),
 *         onOther(slot) for a click on a stack that cannot be lifted now }
 */
export function drawBoard(svg, view) {
  const focused = document.activeElement?.closest?.("[data-slot]")?.dataset.slot;
  svg.replaceChildren();
  svg.append(el("circle", { class: "table", cx: CX, cy: CY, r: 295 }));
  svg.append(el("circle", { class: "track", cx: CX, cy: CY, r: RING }));
  view.board.forEach((stack, slot) => svg.append(slotGroup(slot, stack, view)));
  const middle = el("g", { class: "middle", "aria-hidden": "true" });
  const [first, second] = view.caption;
  middle.append(el("text", { class: "caption", x: CX, y: CY - 34 }, first || ""));
  middle.append(el("text", { class: "caption small", x: CX, y: CY - 10 }, second || ""));
  const hand = view.hand || "";
  [...hand].forEach((button, i) => {
    const x = CX + (i - (hand.length - 1) / 2) * 36;
    middle.append(coin(button, x, CY + 22));
  });
  svg.append(middle);
  if (focused !== undefined) {
    const again = svg.querySelector(`[data-slot="${focused}"][tabindex="0"]`);
    if (again) again.focus();
  }
}

/** Small inline buttons (HTML) for a stack, e.g. the final stack of a round. */
export function chips(stack) {
  const span = document.createElement("span");
  span.className = "chips";
  for (const button of stack) {
    const chip = document.createElement("span");
    chip.className = `chip chip-${button}`;
    chip.textContent = button;
    chip.title = NAMES[button];
    span.append(chip);
  }
  span.setAttribute("aria-label", stackWords(stack));
  span.setAttribute("role", "img");
  return span;
}
