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
