// A test reporter that writes how long each test file took, longest first, to a JSON file
// (TEST_TIMINGS, see test/run.ts), to find where the suite's time goes.
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';

interface SummaryEvent {
  type: 'test:summary';
  data: { file?: string; duration_ms: number; counts: { tests: number; failed: number } };
}

export default async function* timings(source: AsyncIterable<{ type: string; data: unknown }>) {
  const files: { file: string; seconds: number; tests: number; failed: number }[] = [];
  let total = 0;
  for await (const event of source) {
    if (event.type !== 'test:summary') continue;
    const { data } = event as SummaryEvent;
    if (data.file === undefined) total = data.duration_ms;
    else
      files.push({
        file: relative(process.cwd(), data.file),
        seconds: Math.round(data.duration_ms) / 1000,
        tests: data.counts.tests,
        failed: data.counts.failed,
      });
  }
  files.sort((a, b) => b.seconds - a.seconds);
  const out = process.env.TEST_TIMINGS ?? 'test-timings.json';
  writeFileSync(out, JSON.stringify({ seconds: Math.round(total) / 1000, files }, null, 2) + '\n');
  yield `# per-file durations written to ${out}\n`;
}
