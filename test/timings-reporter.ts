// A test reporter that writes how long each test file took, longest first, to a JSON file
// (TEST_TIMINGS, see test/run.ts), to find where the suite's time goes.
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';

export interface TestSummary {
  file?: string;
  duration_ms: number;
  counts: { tests: number; failed: number };
}

/** Writes the files' durations, longest first, to out; returns a line saying so. */
export function writeTimings(summaries: TestSummary[], out: string): string {
  const files = summaries
    .filter((s) => s.file !== undefined)
    .map((s) => ({
      file: relative(process.cwd(), s.file!),
      seconds: Math.round(s.duration_ms) / 1000,
      tests: s.counts.tests,
      failed: s.counts.failed,
    }))
    .sort((a, b) => b.seconds - a.seconds);
  const total = summaries.find((s) => s.file === undefined)?.duration_ms ?? 0;
  writeFileSync(out, JSON.stringify({ seconds: Math.round(total) / 1000, files }, null, 2) + '\n');
  return `# per-file durations written to ${out}`;
}

/** As a reporter: `node --test --test-reporter=./test/timings-reporter.ts` (TEST_TIMINGS names the file). */
export default async function* timings(source: AsyncIterable<{ type: string; data: unknown }>) {
  const summaries: TestSummary[] = [];
  for await (const event of source) if (event.type === 'test:summary') summaries.push(event.data as TestSummary);
  yield `${writeTimings(summaries, process.env.TEST_TIMINGS ?? 'test-timings.json')}\n`;
}
