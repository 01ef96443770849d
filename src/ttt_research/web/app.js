// The browser game: plays the served model's greedy policy against the person, on the board
// it was trained on, and shows the agent's move probabilities as a heat map and the time each
// inference took.
//
// The board: model.json's meta.game ("m,n,k": m rows of n cells, k in a row wins; absent:
// tic-tac-toe, whose 3x3 buttons index.html holds). Another board's buttons are drawn here, and
// its wins are checked from its lines (rules.js makeGame).
//
// Where the model runs (model.json's `engine`): "browser", with onnxruntime-web served from
// a checkout's web/node_modules (no CDN); or "server", when the server has no onnxruntime-web
// (an installed wheel): then each move's logits come from POST /logits, onnxruntime in Python.
//
// Exactness at the edges: before the first game the model is run on all the positions where
// somebody moves (4,520 on tic-tac-toe; on a 4x4 board, too many for a page: the server checked
// them at start, rules.js MAX_CODES), and each move is checked again (rules.js illegalReason, the rule of the
// Python package): a model with NaN or all -inf logits, or one that prefers an occupied cell
// anywhere, is refused with one line naming the board, never played.
//
// The page keeps its state in data attributes that a test can wait on: #board has
// data-state (loading | ready | human | agent | over | error), data-ply and data-engine;
// #result has data-result (human | agent | draw); #timing has data-last-ms, data-median-ms,
// data-moves.

import {
  X, O, TIC_TAC_TOE, boardText, decide, decisionBoards, gameOf, illegalReason, isOver, median, mover, moverView,
  winner,
} from "./rules.js";

const ORT_MODULE = "./node_modules/onnxruntime-web/dist/ort.wasm.min.mjs";
const $ = (id) => document.getElementById(id);
const boardEl = $("board");
let cells = [...boardEl.querySelectorAll(".cell")];
const NAME = { [X]: "X", [O]: "O" };
let mnk = TIC_TAC_TOE; // the game: { m, n, k, cells, lines } (rules.js makeGame)

let ort = null;
let session = null;
let engine = "browser"; // or "server": see above
let game = null; // { board, human, id }
let games = 0; // bumps on every new game, so a late inference of an old game is dropped
const times = []; // ms per agent move, every game since the page loaded

function setState(state) {
  boardEl.dataset.state = state;
  const plies = game ? game.board.filter((v) => v !== 0).length : 0;
  boardEl.dataset.ply = String(plies);
  for (const c of cells) {
    const i = Number(c.dataset.cell);
    c.disabled = state !== "human" || game.board[i] !== 0;
  }
}

function fail(message) {
  const el = $("error");
  el.textContent = message;
  el.hidden = false;
  $("status").textContent = "";
  for (const b of document.querySelectorAll(".seats button")) b.disabled = true;
  setState("error");
}

function draw(heat) {
  cells.forEach((c, i) => {
    const v = game.board[i];
    c.replaceChildren();
    if (v) {
      const piece = document.createElement("span");
      piece.className = "piece";
      piece.textContent = NAME[v];
      c.appendChild(piece);
    }
    c.classList.toggle("last", heat?.move === i);
    const p = heat && heat.probs[i];
    c.style.background = p ? `rgba(var(--heat), ${(0.08 + 0.72 * p).toFixed(3)})` : "";
    if (heat && heat.before[i] === 0) {
      const tag = document.createElement("span");
      tag.className = "prob";
      tag.textContent = `${(100 * p).toFixed(1)}%`;
      c.appendChild(tag);
    }
  });
}

function showTiming() {
  const el = $("timing");
  const last = times[times.length - 1];
  const med = median(times);
  el.dataset.lastMs = last.toFixed(4);
  el.dataset.medianMs = med.toFixed(4);
  el.dataset.moves = String(times.length);
  const where = engine === "server" ? "on the server, round trip" : "in the browser";
  // The 2 ms goal is the in-browser model's; a server's figure is mostly the HTTP round trip.
  const note = engine === "server"
    ? "the request to this page's server and back, most of it the network, not the model"
    : "the model run by onnxruntime-web; goal: under 2 ms";
  el.textContent = `Inference per move (${where}): ${last.toFixed(2)} ms this move, median ${med.toFixed(2)} ms ` +
    `over ${times.length} move${times.length === 1 ? "" : "s"} (${note}).`;
}

async function logitsFor(position) {
  if (engine === "server") return serverLogits(position);
  const input = new ort.Tensor("float32", moverView(position), [1, mnk.cells]);
  const t0 = performance.now();
  const out = await session.run({ [session.inputNames[0]]: input });
  const ms = performance.now() - t0;
  return { logits: out[session.outputNames[0]].data, ms };
}

async function serverLogits(position) {
  const t0 = performance.now();
  const response = await fetch("logits", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ board: position }),
  });
  if (!response.ok) throw new Error((await response.text()).trim() || response.statusText);
  const { logits } = await response.json();
  const ms = performance.now() - t0; // the round trip: the server's inference and the request
  return { logits: logits.map((v) => (v === null ? -Infinity : v)), ms };
}

function finish() {
  const w = winner(game.board, mnk);
  const result = w === 0 ? "draw" : w === game.human ? "human" : "agent";
  const el = $("result");
  el.dataset.result = result;
  el.textContent = { human: "You win!", agent: "The agent wins.", draw: "Draw." }[result];
  el.hidden = false;
  $("status").textContent = "Choose a side to play again.";
  setState("over");
}

async function agentMove() {
  const id = game.id;
  setState("agent");
  $("status").textContent = "The agent is thinking…";
  let decision;
  try {
    const { logits, ms } = await logitsFor(game.board);
    const why = illegalReason(game.board, logits);
    if (why) throw new Error(`no legal greedy move at ${boardText(game.board, mnk)}: ${why}; refused`);
    decision = decide(game.board, logits);
    times.push(ms);
  } catch (e) {
    fail(`The model failed to run: ${e.message ?? e}`);
    return;
  }
  if (id !== game.id) return; // a new game started meanwhile
  const before = [...game.board];
  game.board[decision.move] = mover(game.board);
  draw({ ...decision, before });
  showTiming();
  if (isOver(game.board, mnk)) return finish();
  $("status").textContent = `Your turn (${NAME[game.human]}).`;
  setState("human");
}

function humanMove(i) {
  if (boardEl.dataset.state !== "human" || game.board[i] !== 0) return;
  game.board[i] = game.human;
  draw(null);
  if (isOver(game.board, mnk)) return finish();
  agentMove();
}

function start(seat) {
  game = { board: new Array(mnk.cells).fill(0), human: seat === "x" ? X : O, id: ++games };
  $("result").hidden = true;
  delete $("result").dataset.result;
  draw(null);
  if (game.human === X) {
    $("status").textContent = "Your turn (X).";
    setState("human");
  } else {
    agentMove();
  }
}

async function load() {
  const params = new URLSearchParams(location.search);
  const url = params.get("model") ?? "policy.onnx";
  const info = params.has("model") ? null
    : await fetch("model.json").then((r) => (r.ok ? r.json() : null)).catch(() => null);
  if (info?.error) return fail(`The model could not be loaded: ${info.error}`);
  const said = gameOf(info?.meta?.game);
  if (typeof said === "string") return fail(`The model's board is unknown: ${said}`);
  drawBoard(said);
  if (info?.engine === "server") return useServer(info);
  try {
    ort = await import(ORT_MODULE);
  } catch (e) {
    return fail(`onnxruntime-web is not installed next to this page: run "npm ci" in web/ (${e.message})`);
  }
  // One thread: the model is a tiny MLP, worker hand-offs would cost more than they save,
  // and a single thread needs no cross-origin isolation from the server.
  ort.env.wasm.numThreads = 1;
  const name = info ? describe(info) : url;
  let response;
  try {
    response = await fetch(url);
  } catch (e) {
    return fail(`The model could not be loaded from ${url}: ${e.message}`);
  }
  if (!response.ok) {
    const why = (await response.text()).trim().slice(0, 200) || response.statusText;
    return fail(`The model could not be loaded from ${url} (HTTP ${response.status}): ${why}`);
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  try {
    session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
    // A first run warms the runtime up (not timed) and checks the contract's shapes.
    const zeros = new ort.Tensor("float32", new Float32Array(mnk.cells), [1, mnk.cells]);
    const out = await session.run({ [session.inputNames[0]]: zeros });
    const dims = out[session.outputNames[0]].dims;
    if (dims.length !== 2 || dims[1] !== mnk.cells) {
      throw new Error(`its output is [${dims}], the contract wants [N, ${mnk.cells}]`);
    }
  } catch (e) {
    return fail(`${url} is not a policy model this page can run: ${e.message ?? e}`);
  }
  let why;
  try {
    why = await checkEverywhere();
  } catch (e) {
    return fail(`${url} is not a policy model this page can run: ${e.message ?? e}`);
  }
  if (why) return fail(`${url}: ${why}; refused, not played`);
  ready(name);
}

// The model on every position where somebody moves, in one batch [4520, 9] on tic-tac-toe
// (the contract's free N): the first refusal as one line, or null when it has a legal greedy
// move everywhere (or when the board has too many positions for a page: the server checked them).
async function checkEverywhere() {
  const boards = decisionBoards(mnk);
  if (boards === null) return null;
  const w = mnk.cells;
  const views = new Float32Array(w * boards.length);
  boards.forEach((b, k) => views.set(moverView(b), w * k));
  const input = new ort.Tensor("float32", views, [boards.length, w]);
  const out = (await session.run({ [session.inputNames[0]]: input }))[session.outputNames[0]].data;
  if (out.length !== views.length) throw new Error(`its output has ${out.length} numbers for ${boards.length} boards`);
  let first = null;
  let count = 0;
  boards.forEach((b, k) => {
    const why = illegalReason(b, out.subarray(w * k, w * k + w));
    if (why) {
      count += 1;
      first ??= `at ${boardText(b, mnk)}: ${why}`;
    }
  });
  return first && `the policy has no legal greedy move at ${count} of ${boards.length} positions where it moves, first ${first}`;
}

async function useServer(info) {
  engine = "server";
  boardEl.dataset.engine = engine;
  try {
    await serverLogits(new Array(mnk.cells).fill(0)); // the first move's question, as a check and a warm-up
  } catch (e) {
    return fail(`The server could not run the model: ${e.message ?? e}`);
  }
  ready(`${describe(info)}, run by the server`);
}

function ready(name) {
  $("model").textContent = `Model: ${name}`;
  for (const b of document.querySelectorAll(".seats button")) b.disabled = false;
  $("status").textContent = "Choose a side to start.";
  boardEl.dataset.state = "ready";
}

function describe(info) {
  const m = info.meta ?? {};
  let hidden = null;
  try {
    const net = JSON.parse(m.net);
    hidden = net.table ? "table" : net.hidden.join("x"); // a Q-table (algo=qlearning) has no layers
  } catch {
    // a foreign model without our metadata: the file name says enough
  }
  const parts = [m.algo, hidden, m.seed && `seed ${m.seed}`,
    m.games_trained && `${Number(m.games_trained).toLocaleString("en")} games`].filter(Boolean);
  return parts.length ? `${info.name} (${parts.join(", ")})` : info.name;
}

// The board's buttons: index.html's nine for tic-tac-toe; another board's m rows of n drawn
// here, the same buttons (class cell, data-cell 0 .. m*n - 1, "cell N" for a screen reader),
// and the title names its game.
function drawBoard(said) {
  mnk = said;
  if (mnk === TIC_TAC_TOE) return;
  cells = Array.from({ length: mnk.cells }, (_, i) => {
    const c = document.createElement("button");
    c.className = "cell";
    c.dataset.cell = String(i);
    c.setAttribute("aria-label", `cell ${i + 1}`);
    c.disabled = true;
    c.addEventListener("click", () => humanMove(i));
    return c;
  });
  boardEl.replaceChildren(...cells);
  boardEl.style.gridTemplateColumns = `repeat(${mnk.n}, var(--cell))`;
  boardEl.style.gridTemplateRows = `repeat(${mnk.m}, var(--cell))`;
  boardEl.dataset.game = mnk.name;
  const title = `The ${mnk.name} game (${mnk.k} in a row on ${mnk.m}x${mnk.n}) against a trained agent`;
  document.querySelector("h1").textContent = title;
  document.title = `ttt_research: ${mnk.name} against the agent`;
}

for (const c of cells) c.disabled = true;
for (const c of cells) c.addEventListener("click", () => humanMove(Number(c.dataset.cell)));
for (const b of document.querySelectorAll(".seats button")) b.addEventListener("click", () => start(b.dataset.seat));
window.ttt = {
  times, state: () => game && { board: [...game.board], human: game.human }, game: () => mnk.name,
};
load();
