// Exact arithmetic for `countdown`: an iterative infix parser, rational evaluation, and the search over expressions.
// Not Python's eval (no unary signs, no floats, no leading zeros) and never recursive, so no input can overflow the stack.

/** An exact rational `num / den` in lowest terms with `den > 0`. */
export interface Rational {
  readonly num: bigint;
  readonly den: bigint;
}

/** A binary operator of the expressions. */
export type Operator = '+' | '-' | '*' | '/';

/** A well-formed expression in reverse Polish order: number literals (digit strings) and operators. */
export type Rpn = readonly (Operator | { readonly literal: string })[];

const operators: readonly Operator[] = ['+', '-', '*', '/'];
const precedence: Readonly<Record<Operator, number>> = { '+': 1, '-': 1, '*': 2, '/': 2 };
const isOperator = (t: string): t is Operator => (operators as readonly string[]).includes(t);
const isDigit = (t: string): boolean => t.length === 1 && t >= '0' && t <= '9';

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b < 0n ? -b : b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** `num / den` reduced, or `undefined` when `den` is 0. */
export function rational(num: bigint, den: bigint = 1n): Rational | undefined {
  if (den === 0n) return undefined;
  const sign = den < 0n ? -1n : 1n;
  const g = gcd(num, den) || 1n;
  return { num: (sign * num) / g, den: (sign * den) / g };
}

/** `a op b` exactly; `undefined` for a division by zero. */
export function applyOperator(op: Operator, a: Rational, b: Rational): Rational | undefined {
  switch (op) {
    case '+':
      return rational(a.num * b.den + b.num * a.den, a.den * b.den);
    case '-':
      return rational(a.num * b.den - b.num * a.den, a.den * b.den);
    case '*':
      return rational(a.num * b.num, a.den * b.den);
    case '/':
      return rational(a.num * b.den, a.den * b.num);
  }
}

/**
 * Parses the grammar `expr := term (('+'|'-') term)*`, `term := factor (('*'|'/') factor)*`,
 * `factor := number | '(' expr ')'`, `number := '0' | [1-9][0-9]*`, where each token is one
 * character. Returns the expression in reverse Polish order, or `undefined` if the tokens are not
 * a sentence of the grammar (empty, unknown token, unary sign, leading zero, unbalanced or empty
 * parentheses, two operands or operators in a row). Shunting-yard with an explicit state, so the
 * depth of nesting costs memory, not stack.
 */
export function parseExpression(tokens: readonly (string | undefined)[]): Rpn | undefined {
  const output: (Operator | { literal: string })[] = [];
  const stack: (Operator | '(')[] = [];
  let expectOperand = true;
  let i = 0;
  while (i < tokens.length) {
    const t = tokens[i];
    if (t === undefined) return undefined;
    if (isDigit(t)) {
      if (!expectOperand) return undefined;
      let j = i;
      while (j < tokens.length && isDigit(tokens[j] ?? '')) j++;
      const literal = tokens.slice(i, j).join('');
      if (literal.length > 1 && literal.startsWith('0')) return undefined;
      output.push({ literal });
      expectOperand = false;
      i = j;
      continue;
    }
    if (t === '(') {
      if (!expectOperand) return undefined;
      stack.push('(');
    } else if (t === ')') {
      if (expectOperand) return undefined;
      for (;;) {
        const top = stack.pop();
        if (top === undefined) return undefined;
        if (top === '(') break;
        output.push(top);
      }
    } else if (isOperator(t)) {
      if (expectOperand) return undefined;
      for (;;) {
        const top = stack[stack.length - 1];
        if (top === undefined || top === '(' || precedence[top] < precedence[t]) break;
        output.push(top);
        stack.pop();
      }
      stack.push(t);
      expectOperand = true;
    } else {
      return undefined;
    }
    i++;
  }
  if (expectOperand) return undefined;
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top === '(') return undefined;
    output.push(top);
  }
  return output;
}

/** The number literals of `rpn`, in order of appearance. */
export function literalsOf(rpn: Rpn): string[] {
  return rpn.flatMap((item) => (typeof item === 'string' ? [] : [item.literal]));
}

/** Exact value of a well-formed `rpn`; `undefined` if it divides by zero anywhere. */
export function evaluateRpn(rpn: Rpn): Rational | undefined {
  const stack: Rational[] = [];
  for (const item of rpn) {
    if (typeof item !== 'string') {
      stack.push({ num: BigInt(item.literal), den: 1n });
      continue;
    }
    const b = stack.pop();
    const a = stack.pop();
    if (a === undefined || b === undefined) throw new Error('evaluateRpn: malformed rpn');
    const value = applyOperator(item, a, b);
    if (value === undefined) return undefined;
    stack.push(value);
  }
  if (stack.length !== 1) throw new Error('evaluateRpn: malformed rpn');
  return stack[0];
}

/** One expression over three numbers, printed with the fewest parentheses. */
export interface ThreeNumberExpression {
  /** The expression, e.g. `(3+5)*7`. */
  readonly text: string;
  /** Its exact value, or `undefined` if it divides by zero. */
  readonly value: Rational | undefined;
}

const permutations3 = [
  [0, 1, 2],
  [0, 2, 1],
  [1, 0, 2],
  [1, 2, 0],
  [2, 0, 1],
  [2, 1, 0],
] as const;

/**
 * Every expression using each of three numbers once, in a fixed order: number orders
 * (permutations in lexicographic order of positions), then shape `(x∘y)∘z` before `x∘(y∘z)`, then
 * operators in the order `+ - * /`. 6 × 2 × 16 = 192 expressions; every binary tree with three
 * leaves is one of the two shapes. Parentheses are printed only where they change the value.
 */
export function threeNumberExpressions(numbers: readonly [number, number, number]): ThreeNumberExpression[] {
  const out: ThreeNumberExpression[] = [];
  const q = numbers.map((n) => ({ num: BigInt(n), den: 1n }));
  for (const [i, j, k] of permutations3) {
    const [x, y, z] = [q[i] as Rational, q[j] as Rational, q[k] as Rational];
    const [sx, sy, sz] = [numbers[i], numbers[j], numbers[k]].map(String);
    for (const shape of ['left', 'right'] as const) {
      for (const o1 of operators) {
        for (const o2 of operators) {
          if (shape === 'left') {
            // (x o1 y) o2 z: the brackets matter only when o1 binds less tightly than o2.
            const inner = applyOperator(o1, x, y);
            const value = inner && applyOperator(o2, inner, z);
            const left = precedence[o1] < precedence[o2] ? `(${sx}${o1}${sy})` : `${sx}${o1}${sy}`;
            out.push({ text: `${left}${o2}${sz}`, value });
          } else {
            // x o1 (y o2 z): the brackets matter when o2 binds less tightly, or equally after - or /.
            const inner = applyOperator(o2, y, z);
            const value = inner && applyOperator(o1, x, inner);
            const keep =
              precedence[o2] < precedence[o1] || (precedence[o2] === precedence[o1] && (o1 === '-' || o1 === '/'));
            const right = keep ? `(${sy}${o2}${sz})` : `${sy}${o2}${sz}`;
            out.push({ text: `${sx}${o1}${right}`, value });
          }
        }
      }
    }
  }
  return out;
}
