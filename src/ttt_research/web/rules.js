// The rules of an m,n,k game and the greedy policy's decision, as in the Python package.
//
// A game is m rows of n cells where k in a row (across, down or diagonal) wins; tic-tac-toe
// is 3,3,3, the board of a model without `game` metadata. A board is m * n numbers, row by
// row (cell r * n + c is row r, column c): +1 X, -1 O, 0 empty. X moves first, so the mover
// follows from the board. The model sees the mover's view (+1 own piece, -1 opponent's,
// 0 empty), exactly the ONNX contract's input.

export const X = 1;
export const O = -1;
const MAX_CELLS = 16; // the largest board the Python package plays (env/mnk.py)

/**
 * The game m,n,k: { m, n, k, cells, name, lines }, every line of k cells as cell indices:
 * rows, columns, then both diagonals, in the order of env/mnk.py (tic-tac-toe's 8 lines:
 * 3 rows, 3 columns, 2 diagonals).
 */
export function makeGame(m, n, k) {
  const lines = [];
  for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]]) {
    for (let r = 0; r < m; r++) {
      for (let c = 0; c < n; c++) {
        const endR = r + dr * (k - 1);
        const endC = c + dc * (k - 1);
        if (endR >= 0 && endR < m && endC >= 0 && endC < n) {
          lines.push(Array.from({ length: k }, (_, i) => (r + dr * i) * n + c + dc * i));
        }
      }
    }
  }
  return { m, n, k, cells: m * n, name: `${m},${n},${k}`, lines };
}

export const TIC_TAC_TOE = makeGame(3, 3, 3);

/**
 * The game a model's `game` metadata names ("m,n,k"; absent: tic-tac-toe), or a string saying
 * why it names none (the boards the Python package accepts: at most 16 cells, 1 < k <= max(m, n)).
 */
export function gameOf(said) {
  if (said === undefined || said === null) return TIC_TAC_TOE;
  const parts = String(said).split(",");
  const sizes = parts.map((p) => (/^\s*\d+\s*$/.test(p) ? Number(p) : NaN));
  if (sizes.length !== 3 || sizes.some((v) => !(v >= 1))) return `its game ${JSON.stringify(said)} is not three whole numbers m,n,k`;
  const [m, n, k] = sizes;
  if (m * n > MAX_CELLS) return `its game ${said} has ${m * n} cells; at most ${MAX_CELLS}`;
  if (!(k > 1 && k <= Math.max(m, n))) return `its game ${said}: k must be in 2..${Math.max(m, n)}`;
  return makeGame(m, n, k);
}

/** +1 if X has a line of the game's k, -1 if O has, 0 otherwise. */
export function winner(board, game = TIC_TAC_TOE) {
  for (const line of game.lines) {
    let s = 0;
    for (const i of line) s += board[i];
    if (s === game.k) return X;
    if (s === -game.k) return O;
  }
  return 0;
}

/** Whose turn it is: X when the pieces are level. */
export function mover(board) {
  const pieces = board.reduce((n, v) => n + (v !== 0 ? 1 : 0), 0);
  return pieces % 2 === 0 ? X : O;
}

/** Over when somebody has a line or the board is full. */
export function isOver(board, game = TIC_TAC_TOE) {
  return winner(board, game) !== 0 || board.every((v) => v !== 0);
}

/** The model's input: Float32Array(cells), the board from the mover's side. */
export function moverView(board) {
  const m = mover(board);
  return Float32Array.from(board, (v) => v * m);
}

/**
 * Why these logits give the board no legal greedy move, or null when they do: the strict
 * rule of the Python package for a policy file (evaluate.check_logits). A NaN anywhere, an
 * argmax (first maximum, the ONNX contract's greedy move) on an occupied cell, or an
 * infinite largest logit is refused: such a policy is never played. Cells are named 1 to m * n.
 */
export function illegalReason(board, logits) {
  const nan = [];
  for (let i = 0; i < board.length; i++) if (Number.isNaN(logits[i])) nan.push(i + 1);
  if (nan.length) return `its logits are NaN at cell(s) ${nan.join(" ")}`;
  let best = 0;
  for (let i = 1; i < board.length; i++) if (logits[i] > logits[best]) best = i;
  const top = logits[best];
  if (board[best] !== 0) {
    if (top === -Infinity) return `every logit is -inf, so its argmax is the occupied cell ${best + 1}`;
    return `it picks the occupied cell ${best + 1} (logit ${top.toPrecision(4)})`;
  }
  if (top === -Infinity) return "every empty cell's logit is -inf: it prefers none of them";
  if (top === Infinity) return `its largest logit is inf (cell ${best + 1}): no move probabilities`;
  return null;
}

/** A board in one word, rows split by '/': "X.O/.X./... (O to move)", as the Python messages. */
export function boardText(board, game = TIC_TAC_TOE) {
  const marks = board.map((v) => (v === X ? "X" : v === O ? "O" : ".")).join("");
  const rows = Array.from({ length: game.m }, (_, r) => marks.slice(r * game.n, (r + 1) * game.n));
  return `${rows.join("/")} (${mover(board) === X ? "X" : "O"} to move)`;
}

// The most codes (3^cells) decisionBoards enumerates: 3,4,3's 531,441 (79,563 boards, a
// [79563, 12] batch). A 4x4 board's 43M codes would take the page minutes and gigabytes;
// there the server's check at start (every position, policy_file) stands for the page's.
export const MAX_CODES = 3 ** 12;

/**
 * Every position where somebody is to move (tic-tac-toe's 4,520 boards, in the Python code
 * order: cell 0 is the lowest base-3 digit, 1 X and 2 O): what a model is checked on before it
 * plays; null on a board of more than MAX_CODES codes.
 */
export function decisionBoards(game = TIC_TAC_TOE) {
  const codes = 3 ** game.cells;
  if (codes > MAX_CODES) return null;
  const boards = [];
  for (let code = 0; code < codes; code++) {
    const board = new Array(game.cells);
    for (let i = 0, c = code; i < game.cells; i++, c = Math.floor(c / 3)) board[i] = [0, X, O][c % 3];
    const xs = board.filter((v) => v === X).length;
    const os = board.filter((v) => v === O).length;
    if ((xs === os || xs === os + 1) && !isOver(board, game)) boards.push(board);
  }
  return boards;
}

/**
 * The greedy decision from the model's logits, the rule the Python evaluator uses:
 * occupied cells masked, argmax, ties to the lowest cell. Probabilities are the softmax
 * over the empty cells (occupied cells get exactly 0).
 */
export function decide(board, logits) {
  let move = -1;
  for (let i = 0; i < board.length; i++) {
    if (board[i] === 0 && (move < 0 || logits[i] > logits[move])) move = i;
  }
  const probs = new Array(board.length).fill(0);
  let total = 0;
  for (let i = 0; i < board.length; i++) {
    if (board[i] === 0) {
      probs[i] = Math.exp(logits[i] - logits[move]); // shifted by the max: no overflow
      total += probs[i];
    }
  }
  return { move, probs: probs.map((p) => p / total) };
}

/** The median of a non-empty list of numbers. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
