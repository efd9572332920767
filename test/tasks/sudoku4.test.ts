// The 288 solution grids, puzzle generation with unique solutions, the grid split, and hand-checked d1 rewards.
import { describe, expect, it } from 'vitest';
import { countSolutions, createSudoku4Task, EOS, isValidSudoku4, MASK, sudoku4Grids } from '../../src/tasks/index.js';

/** All 4-tuples of rows, each a permutation of 1–4, that form a valid grid: an enumeration independent of the DFS. */
function bruteForceGrids(): string[] {
  const perms: number[][] = [];
  for (let a = 1; a <= 4; a++)
    for (let b = 1; b <= 4; b++)
      for (let c = 1; c <= 4; c++)
        for (let d = 1; d <= 4; d++) if (new Set([a, b, c, d]).size === 4) perms.push([a, b, c, d]);
  const out: string[] = [];
  for (const r0 of perms)
    for (const r1 of perms)
      for (const r2 of perms)
        for (const r3 of perms) {
          const g = [...r0, ...r1, ...r2, ...r3];
          if (isValidSudoku4(g)) out.push(g.join(''));
        }
  return out;
}

describe('sudoku4 grids', () => {
  it('enumerates the 288 valid grids in lexicographic order, matching brute force', () => {
    const grids = sudoku4Grids().map((g) => g.join(''));
    expect(grids).toHaveLength(288);
    expect(new Set(grids).size).toBe(288);
    expect(grids).toEqual([...grids].sort());
    expect(grids).toEqual(bruteForceGrids().sort());
    expect(grids[0]).toBe('1234341221434321');
  });

  it('rejects invalid grids', () => {
    const g = [...(sudoku4Grids()[17] as number[])];
    expect(isValidSudoku4(g)).toBe(true);
    [g[0], g[1]] = [g[1] as number, g[0] as number]; // rows still permutations, columns broken
    expect(isValidSudoku4(g)).toBe(false);
    expect(isValidSudoku4([1, 2, 3, 4])).toBe(false);
    // rows, columns fine but boxes broken (a Latin square that is not a Sudoku)
    expect(isValidSudoku4([1, 2, 3, 4, 2, 3, 4, 1, 3, 4, 1, 2, 4, 1, 2, 3])).toBe(false);
  });

  it('counts solutions of a puzzle', () => {
    expect(countSolutions(new Array(16).fill(0))).toBe(288);
    expect(countSolutions([3, 1, 0, 2, 2, 0, 0, 0, 0, 2, 1, 0, 0, 3, 2, 0])).toBe(1);
    expect(countSolutions(new Array(16).fill(0), 5)).toBe(5);
  });
});

describe('sudoku4 task', () => {
  const task = createSudoku4Task();
  const p = task.makeProblem('3102200002100320'); // a row of d1's test set; solution 3142243142131324
  const enc = (text: string) => task.tokenizer.encode(text);

  it('builds the documented layout', () => {
    expect(task.tokenizer.decode(p.prompt)).toBe('<bos>3102200002100320<sep>');
    expect(task.tokenizer.decode(task.goldResponse(p))).toBe('3142243142131324<eos>');
    expect([task.vocabSize, task.promptLength, task.responseLength]).toEqual([10, 18, 17]);
  });

  it('rewards the fraction of blank cells right (d1)', () => {
    // 8 blanks at cells 2, 5, 6, 7, 8, 11, 12, 15 with answers 4, 4, 3, 1, 4, 3, 1, 4
    expect(task.reward(p, enc('3142243142131324<eos>'))).toEqual({ reward: 1, correct: true });
    expect(task.reward(p, enc('3112243142131324<eos>'))).toEqual({ reward: 7 / 8, correct: false });
    // every blank filled with 1: right only at cells 7 and 12
    expect(task.reward(p, enc('3112211112111321<eos>'))).toEqual({ reward: 2 / 8, correct: false });
    // givens are not scored: all blanks right, one given wrong ⇒ reward 1 but not a solution
    expect(task.reward(p, enc('4142243142131324<eos>'))).toEqual({ reward: 1, correct: false });
    // a blank echoed as 0 or a MASK token counts that cell wrong
    expect(task.reward(p, enc('3102243142131324<eos>'))).toEqual({ reward: 7 / 8, correct: false });
    const masked = enc('3142243142131324<eos>');
    masked[15] = MASK;
    expect(task.reward(p, masked)).toEqual({ reward: 7 / 8, correct: false });
  });

  it('reads cells by position: short bodies miss cells, extra tokens are ignored', () => {
    expect(task.reward(p, enc('31422431<eos>'))).toEqual({ reward: 4 / 8, correct: false }); // cells 2, 5, 6, 7
    expect(task.reward(p, enc('314224314213132412<eos>'))).toEqual({ reward: 1, correct: false });
    expect(task.reward(p, enc('3142243142131324'))).toEqual({ reward: 0, correct: false }); // no EOS
    expect(task.reward(p, [...enc('3142243142131324'), -1, EOS])).toEqual({ reward: 1, correct: false });
  });

  it('generates puzzles with the configured blanks and a unique solution', () => {
    const t = createSudoku4Task({ minBlanks: 4, maxBlanks: 12 });
    const counts = new Set<number>();
    for (const q of t.trainProblems(300, 5)) {
      const blanks = q.puzzle.filter((d) => d === 0).length;
      counts.add(blanks);
      expect(countSolutions(q.puzzle)).toBe(1);
      expect(q.puzzle.every((d, i) => d === 0 || d === q.solution[i])).toBe(true);
      expect(q.solution).toEqual(sudoku4Grids()[q.gridIndex]);
    }
    expect([...counts].sort((a, b) => a - b)).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(task.trainProblems(50, 1).every((q) => q.puzzle.filter((d) => d === 0).length === 8)).toBe(true);
  });

  it('splits by solution grid: 88 eval grids never seen in training', () => {
    const trainGrids = new Set(task.trainProblems(4000, 1).map((q) => q.gridIndex));
    const evalGrids = new Set(task.evalProblems(1500, 1).map((q) => q.gridIndex));
    expect(trainGrids.size).toBe(200);
    expect(evalGrids.size).toBe(88);
    expect([...evalGrids].filter((g) => trainGrids.has(g))).toEqual([]);
    const t = createSudoku4Task({ evalGrids: 10 });
    expect(new Set(t.evalProblems(300, 2).map((q) => q.gridIndex)).size).toBe(10);
  });

  it('validates makeProblem input', () => {
    expect(() => task.makeProblem('31022000021003')).toThrow(/puzzle must be 16 characters 0-4, got "31022000021003"/);
    expect(() => task.makeProblem('0000000000000000')).toThrow(/exactly one solution, got 288/);
  });
});
