// Reading a bulk import file (docs/user-import.md): CSV with a header, or JSON lines, streamed,
// each record with the line of the file it starts on (the header is line 1). Lines that are not
// UTF-8, records with the wrong number of fields and lines that are not JSON objects come out as
// records with an error, so the import reports them beside the others and goes on.
import { createReadStream } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import { parse, CsvError } from 'csv-parse';
import { badRequest } from '../errors.ts';

/** The columns (CSV) and keys (JSON lines) an import file may have; eppn is required. */
export const IMPORT_COLUMNS = [
  'eppn',
  'name',
  'given_name',
  'family_name',
  'display_name',
  'email',
  'affiliation',
  'primary_affiliation',
  'external_id',
  'org_unit',
  'title',
  'employee_number',
  'student_number',
  'entitlement',
  'password_hash',
] as const;
export type ImportColumn = (typeof IMPORT_COLUMNS)[number];

/** Affiliation and entitlement: several values, separated by ';' (or a JSON array). */
export const MULTI_VALUED: readonly ImportColumn[] = ['affiliation', 'entitlement'];

export type ImportFields = Partial<Record<ImportColumn, string | string[] | null>>;

export interface ImportRecord {
  /** the file's line the record starts on, 1-based */
  line: number;
  fields?: ImportFields;
  error?: string;
  /** the file cannot be read past this record */
  fatal?: boolean;
}

export type ImportFormat = 'csv' | 'jsonl';

export function importFormat(file: string): ImportFormat {
  if (/\.csv$/i.test(file)) return 'csv';
  if (/\.jsonl$/i.test(file)) return 'jsonl';
  throw badRequest(`'${file}' must be a .csv or a .jsonl file`);
}

const NOT_UTF8 = 'is not valid UTF-8 (the file must be UTF-8)';
const MAX_RECORD = 64 * 1024;

/**
 * The file as text in pieces that end at a line end, with LF line ends and without a BOM; the
 * numbers of lines that are not UTF-8 go into `bad` before the piece holding them is given out.
 */
async function* decodedText(path: string, bad: Set<number>, onBytes?: (n: number) => void): AsyncGenerator<string> {
  let line = 1;
  let first = true;
  let carry: Buffer = Buffer.alloc(0);
  const piece = (bytes: Buffer): string => {
    if (first && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) bytes = bytes.subarray(3);
    first = false;
    const valid = isUtf8(bytes);
    for (let start = 0; start < bytes.length; line++) {
      const end = bytes.indexOf(10, start);
      const stop = end < 0 ? bytes.length : end + 1;
      if (!valid && !isUtf8(bytes.subarray(start, stop))) bad.add(line);
      start = stop;
    }
    return bytes.toString('utf8').replace(/\r\n/g, '\n');
  };
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    onBytes?.(chunk.length);
    const bytes = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    const end = bytes.lastIndexOf(10);
    if (end < 0) {
      carry = bytes;
      continue;
    }
    carry = bytes.subarray(end + 1);
    yield piece(bytes.subarray(0, end + 1));
  }
  if (carry.length) yield piece(carry);
}

function csvHeader(record: string[]): ImportColumn[] {
  const columns = record.map((c) => c.trim().toLowerCase());
  const unknown = columns.find((c) => !(IMPORT_COLUMNS as readonly string[]).includes(c));
  if (unknown !== undefined)
    throw badRequest(`line 1: unknown column '${unknown.slice(0, 40)}' (columns: ${IMPORT_COLUMNS.join(', ')})`);
  const twice = columns.find((c, i) => columns.indexOf(c) !== i);
  if (twice !== undefined) throw badRequest(`line 1: column '${twice}' appears twice`);
  if (!columns.includes('eppn')) throw badRequest("line 1: the header must name an 'eppn' column");
  return columns as ImportColumn[];
}

function spansBadLine(bad: Set<number>, start: number, end: number): boolean {
  if (bad.size === 0) return false;
  for (let l = start; l <= end; l++) if (bad.has(l)) return true;
  return false;
}

async function* csvRecords(path: string, onBytes?: (n: number) => void): AsyncGenerator<ImportRecord> {
  const bad = new Set<number>();
  const parser = parse({ relax_column_count: true, skip_empty_lines: true, info: true, max_record_size: MAX_RECORD });
  const source = Readable.from(decodedText(path, bad, onBytes));
  source.on('error', (err) => parser.destroy(err));
  source.pipe(parser);
  let columns: ImportColumn[] | undefined;
  let lastLine = 0;
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      // info.lines is the line the record ends on (LF line ends); it starts that many lines earlier
      // as its fields hold line ends.
      const newlines = record.reduce((n, field) => n + (field.split('\n').length - 1), 0);
      const line = info.lines - newlines;
      lastLine = info.lines;
      if (!columns) {
        if (spansBadLine(bad, line, info.lines)) throw badRequest(`line ${line}: the header ${NOT_UTF8}`);
        columns = csvHeader(record);
        continue;
      }
      if (spansBadLine(bad, line, info.lines)) yield { line, error: `line ${NOT_UTF8}` };
      else if (record.length !== columns.length)
        yield { line, error: `has ${record.length} field(s); the header has ${columns.length}` };
      else yield { line, fields: Object.fromEntries(columns.map((c, i) => [c, record[i]!])) };
    }
  } catch (err) {
    if (!(err instanceof CsvError)) throw err;
    const at = (err as CsvError & { lines?: number }).lines ?? lastLine + 1;
    yield { line: at, error: `malformed CSV (${err.message}); the rest of the file was not read`, fatal: true };
  }
  if (!columns) throw badRequest('the file is empty: a CSV import needs a header line');
}

function jsonValue(key: ImportColumn, value: unknown): string | string[] | null {
  if (value === null || typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (MULTI_VALUED.includes(key) && Array.isArray(value) && value.every((v) => typeof v === 'string')) return value;
  throw new Error(`'${key}' must be a string${MULTI_VALUED.includes(key) ? ' or a list of strings' : ''}`);
}

function jsonLine(text: string, line: number, bad: Set<number>): ImportRecord | undefined {
  if (text.trim() === '') return undefined;
  if (bad.has(line)) return { line, error: `line ${NOT_UTF8}` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { line, error: 'is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { line, error: 'must be a JSON object' };
  const fields: ImportFields = {};
  try {
    for (const [key, v] of Object.entries(value)) {
      if (!(IMPORT_COLUMNS as readonly string[]).includes(key))
        return { line, error: `unknown key '${key.slice(0, 40)}' (keys: ${IMPORT_COLUMNS.join(', ')})` };
      fields[key as ImportColumn] = jsonValue(key as ImportColumn, v);
    }
  } catch (err) {
    return { line, error: (err as Error).message };
  }
  return { line, fields };
}

async function* jsonlRecords(path: string, onBytes?: (n: number) => void): AsyncGenerator<ImportRecord> {
  const bad = new Set<number>();
  let line = 0;
  let rest = '';
  for await (const text of decodedText(path, bad, onBytes)) {
    const lines = (rest + text).split('\n');
    rest = lines.pop()!;
    for (const l of lines) {
      const record = jsonLine(l, ++line, bad);
      if (record) yield record;
    }
  }
  const record = rest === '' ? undefined : jsonLine(rest, line + 1, bad);
  if (record) yield record;
}

/** The records of an import file, in order; onBytes is told how much of the file has been read. */
export function readImportFile(path: string, onBytes?: (n: number) => void): AsyncGenerator<ImportRecord> {
  return importFormat(path) === 'csv' ? csvRecords(path, onBytes) : jsonlRecords(path, onBytes);
}
