// SCIM filters (RFC 7644 3.4.2.2): parsed into a small tree that the resources translate into SQL
// conditions (src/store/provisioning.ts), and evaluated in memory only on the values of one
// resource (PATCH value paths such as members[value eq "..."]).
import { scimError } from './errors.ts';

export type Operator = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le' | 'pr';
export type Value = string | number | boolean | null;

export type Filter =
  | { kind: 'and' | 'or'; left: Filter; right: Filter }
  | { kind: 'not'; filter: Filter }
  | { kind: 'cmp'; path: string; op: Operator; value: Value }
  | { kind: 'valuePath'; path: string; filter: Filter };

const OPERATORS = new Set(['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le', 'pr']);
const MAX_LENGTH = 4096;

type Token = { t: 'word'; v: string } | { t: 'str'; v: string } | { t: 'punct'; v: '(' | ')' | '[' | ']' };

const invalid = (message: string) => scimError(400, 'invalidFilter', message);

function readString(input: string, start: number): [string, number] {
  let i = start + 1;
  while (i < input.length && input[i] !== '"') i += input[i] === '\\' ? 2 : 1;
  if (i >= input.length) throw invalid('Unterminated string in filter');
  let value: string;
  try {
    value = JSON.parse(input.slice(start, i + 1)) as string;
  } catch {
    throw invalid('Invalid string in filter');
  }
  // "\u0000" decodes to NUL, which no stored value holds and PostgreSQL refuses in a query
  if (value.includes('\u0000')) throw invalid('A filter string must not contain a NUL character');
  return [value, i + 1];
}

/** A word from where the tokenizer is (sticky: no copy of the rest of the input per word). */
const WORD = /[^\s()[\]"]+/y;

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (c === ' ' || c === '\t') i++;
    else if (c === '(' || c === ')' || c === '[' || c === ']') {
      tokens.push({ t: 'punct', v: c });
      i++;
    } else if (c === '"') {
      const [v, next] = readString(input, i);
      tokens.push({ t: 'str', v });
      i = next;
    } else {
      WORD.lastIndex = i;
      const m = WORD.exec(input);
      if (!m) throw invalid(`Unexpected character '${c}' in filter`);
      tokens.push({ t: 'word', v: m[0] });
      i += m[0].length;
    }
  }
  return tokens;
}

const ATTR_PATH = /^([a-z][a-z0-9:._-]*:)?[a-z$][a-z0-9_$-]*(\.[a-z$][a-z0-9_$-]*)?$/i;

class Parser {
  private at = 0;
  private readonly tokens: Token[];
  constructor(tokens: Token[]) {
    this.tokens = tokens;
  }

  parse(): Filter {
    const f = this.or();
    if (this.at < this.tokens.length) throw invalid('Unexpected text after the end of the filter');
    return f;
  }

  private peekWord(): string | undefined {
    const t = this.tokens[this.at];
    return t?.t === 'word' ? t.v.toLowerCase() : undefined;
  }

  private expect(p: string): void {
    const t = this.tokens[this.at++];
    if (t?.t !== 'punct' || t.v !== p) throw invalid(`Expected '${p}' in filter`);
  }

  private or(): Filter {
    let left = this.and();
    while (this.peekWord() === 'or') {
      this.at++;
      left = { kind: 'or', left, right: this.and() };
    }
    return left;
  }

  private and(): Filter {
    let left = this.unary();
    while (this.peekWord() === 'and') {
      this.at++;
      left = { kind: 'and', left, right: this.unary() };
    }
    return left;
  }

  private unary(): Filter {
    const t = this.tokens[this.at];
    if (!t) throw invalid('Filter ends too early');
    if (t.t === 'word' && t.v.toLowerCase() === 'not') {
      this.at++;
      this.expect('(');
      const filter = this.or();
      this.expect(')');
      return { kind: 'not', filter };
    }
    if (t.t === 'punct' && t.v === '(') {
      this.at++;
      const f = this.or();
      this.expect(')');
      return f;
    }
    return this.attribute();
  }

  private attribute(): Filter {
    const t = this.tokens[this.at++];
    if (t?.t !== 'word' || !ATTR_PATH.test(t.v)) throw invalid('Expected an attribute name in filter');
    const next = this.tokens[this.at];
    if (next?.t === 'punct' && next.v === '[') {
      this.at++;
      const filter = this.or();
      this.expect(']');
      return { kind: 'valuePath', path: t.v, filter };
    }
    const op = this.peekWord();
    if (!op || !OPERATORS.has(op)) throw invalid(`Unknown operator after '${t.v.slice(0, 60)}'`);
    this.at++;
    if (op === 'pr') return { kind: 'cmp', path: t.v, op: 'pr', value: null };
    return { kind: 'cmp', path: t.v, op: op as Operator, value: this.value() };
  }

  private value(): Value {
    const t = this.tokens[this.at++];
    if (!t) throw invalid('Filter ends before a value');
    if (t.t === 'str') return t.v;
    if (t.t === 'word') {
      const w = t.v.toLowerCase();
      if (w === 'true' || w === 'false') return w === 'true';
      if (w === 'null') return null;
      if (/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(t.v)) return Number(t.v);
    }
    throw invalid('Expected a value (a quoted string, a number, true, false or null) in filter');
  }
}

export function parseFilter(input: string): Filter {
  if (input.length > MAX_LENGTH) throw invalid(`Filter is longer than ${MAX_LENGTH} characters`);
  if (!input.trim()) throw invalid('Filter is empty');
  return new Parser(tokenize(input)).parse();
}

/** A filter on one value of a multi-valued attribute (members[value eq "..."]), in memory. */
export function matches(filter: Filter, item: Record<string, unknown>): boolean {
  switch (filter.kind) {
    case 'and':
      return matches(filter.left, item) && matches(filter.right, item);
    case 'or':
      return matches(filter.left, item) || matches(filter.right, item);
    case 'not':
      return !matches(filter.filter, item);
    case 'valuePath':
      throw invalid('Nested value paths are not supported');
    default:
      return compare(valueOf(item, filter.path), filter.op, filter.value);
  }
}

function valueOf(item: Record<string, unknown>, path: string): unknown {
  const key = Object.keys(item).find((k) => k.toLowerCase() === path.toLowerCase());
  return key === undefined ? undefined : item[key];
}

function compare(actual: unknown, op: Operator, expected: Value): boolean {
  if (op === 'pr') return actual !== undefined && actual !== null && actual !== '';
  if (typeof actual === 'string' && typeof expected === 'string') {
    // values of value paths (member ids, e-mail types) compare case-exactly only where it matters: ids are UUIDs
    const a = actual.toLowerCase();
    const e = expected.toLowerCase();
    const ops: Record<string, boolean> = {
      eq: a === e,
      ne: a !== e,
      co: a.includes(e),
      sw: a.startsWith(e),
      ew: a.endsWith(e),
      gt: a > e,
      ge: a >= e,
      lt: a < e,
      le: a <= e,
    };
    return ops[op] ?? false;
  }
  if (op === 'eq') return actual === expected;
  if (op === 'ne') return actual !== expected;
  return false;
}
