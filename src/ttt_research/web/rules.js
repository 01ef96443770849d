// Tic-tac-toe rules and the greedy policy's decision, as in the Python package.
//
// A board is 9 numbers, row by row (cells 0..8): +1 X, -1 O, 0 empty. X moves first,
// so the mover follows from the board. The model sees the mover's view (+1 own piece,
// -1 opponent's, 0 empty), exactly the ONNX contract's input.

export const X = 1;
export const O = -1;

// The 8 lines that win: 3 rows, 3 columns, 2 diagonals.
const LINES = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];

/** +1 if X has a line, -1 if O has, 0 otherwise. */
export function winner(board) {
  for (const [a, b, c] of LINES) {
    const s = board[a] + board[b] + board[c];
    if (s === 3) return X;
    if (s === -3) return O;
  }
  return 0;
}

/** Whose turn it is: X when the pieces are level. */
export function mover(board) {
  const pieces = board.reduce((n, v) => n + (v !== 0 ? 1 : 0), 0);
  return pieces % 2 === 0 ? X : O;
}

/** Over when somebody has a line or the board is full. */
export function isOver(board) {
  return winner(board) !== 0 || board.every((v) => v !== 0);
}

/** The model's input: Float32Array(9), the board from the mover's side. */
export function moverView(board) {
  const m = mover(board);
  return Float32Array.from(board, (v) => v * m);
}

/**
 * Why these logits give the board no legal greedy move, or null when they do: the strict
 * rule of the Python package for a policy file (evaluate.check_logits). A NaN anywhere, an
 * argmax (first maximum, the ONNX contract's greedy move) on an occupied cell, or an
 * infinite largest logit is refused: such a policy is never played. Cells are named 1-9.
 */
export function illegalReason(board, logits) {
  const nan = [];
  for (let i = 0; i < 9; i++) if (Number.isNaN(logits[i])) nan.push(i + 1);
  if (nan.length) return `its logits are NaN at cell(s) ${nan.join(" ")}`;
  let best = 0;
  for (let i = 1; i < 9; i++) if (logits[i] > logits[best]) best = i;
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
export function boardText(board) {
  const marks = board.map((v) => (v === X ? "X" : v === O ? "O" : ".")).join("");
  return `${marks.slice(0, 3)}/${marks.slice(3, 6)}/${marks.slice(6)} (${mover(board) === X ? "X" : "O"} to move)`;
}

/**
 * Every position where somebody is to move (4,520 boards, in the Python code order: cell 0
 * is the lowest base-3 digit, 1 X and 2 O): what a model is checked on before it plays.
 */
export function decisionBoards() {
  const boards = [];
  for (let code = 0; code < 19683; code++) {
    const board = new Array(9);
    for (let i = 0, c = code; i < 9; i++, c = Math.floor(c / 3)) board[i] = [0, X, O][c % 3];
    const xs = board.filter((v) => v === X).length;
    const os = board.filter((v) => v === O).length;
    if ((xs === os || xs === os + 1) && !isOver(board)) boards.push(board);
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
  for (let i = 0; i < 9; i++) {
    if (board[i] === 0 && (move < 0 || logits[i] > logits[move])) move = i;
  }
  const probs = new Array(9).fill(0);
  let total = 0;
  for (let i = 0; i < 9; i++) {
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
