// All 288 solution grids of 4×4 Sudoku (2×2 boxes) in lexicographic order, and the checks puzzles need.
// Not a general Sudoku solver: with 288 grids, "solve" means "filter the list".

/** Row, column and box of each of the 16 cells (row-major), as the lists of cells they hold. */
const units: readonly (readonly number[])[] = (() => {
  const out: number[][] = [];
  for (let i = 0; i < 4; i++) {
    out.push([0, 1, 2, 3].map((j) => 4 * i + j)); // row i
    out.push([0, 1, 2, 3].map((j) => 4 * j + i)); // column i
    const r = 2 * Math.floor(i / 2);
    const c = 2 * (i % 2);
    out.push([4 * r + c, 4 * r + c + 1, 4 * (r + 1) + c, 4 * (r + 1) + c + 1]); // box i
  }
  return out;
})();

/** Whether `grid` (16 digits, row-major) is a solved 4×4 Sudoku: each row, column and 2×2 box holds 1–4 once. */
export function isValidSudoku4(grid: readonly number[]): boolean {
  if (grid.length !== 16) return false;
  return units.every((unit) => {
    const seen = new Set(unit.map((cell) => grid[cell]));
    return [1, 2, 3, 4].every((d) => seen.has(d));
  });
}

let cache: readonly (readonly number[])[] | undefined;

/**
 * Every solved 4×4 Sudoku grid (there are 288), in lexicographic order of the 16-digit strings:
 * depth-first filling of the cells in row-major order, trying digits 1, 2, 3, 4.
 */
export function sudoku4Grids(): readonly (readonly number[])[] {
  if (cache !== undefined) return cache;
  const grids: (readonly number[])[] = [];
  const grid = new Array<number>(16).fill(0);
  const fits = (cell: number, d: number): boolean =>
    units.every((unit) => !unit.includes(cell) || unit.every((c) => grid[c] !== d));
  const fill = (cell: number): void => {
    if (cell === 16) {
      grids.push(Object.freeze([...grid]));
      return;
    }
    for (let d = 1; d <= 4; d++) {
      if (fits(cell, d)) {
        grid[cell] = d;
        fill(cell + 1);
        grid[cell] = 0;
      }
    }
  };
  fill(0);
  cache = Object.freeze(grids);
  return cache;
}

/**
 * How many solution grids agree with `puzzle` (16 digits, 0 = blank) on its givens, counting
 * no further than `limit`. A puzzle has a unique solution iff this is 1.
 */
export function countSolutions(puzzle: readonly number[], limit = Infinity): number {
  let count = 0;
  for (const grid of sudoku4Grids()) {
    let agrees = true;
    for (let i = 0; i < 16; i++) {
      const given = puzzle[i];
      if (given !== 0 && given !== grid[i]) {
        agrees = false;
        break;
      }
    }
    if (agrees && ++count >= limit) return count;
  }
  return count;
}
