// npm run bench [-- <name> [...]]: runs bench/<name>.ts; without a name, bench/compare.ts.
import { readdirSync } from 'node:fs';

const names = readdirSync(new URL('.', import.meta.url))
  .filter(
    (f) =>
      f.endsWith('.ts') &&
      !['run.ts', 'lib.ts', 'floor-server.ts', 'peer-server.ts', 'peer-client.ts', 'signin-flow.ts'].includes(f),
  )
  .map((f) => f.replace(/\.ts$/, ''))
  .sort();
const argv = process.argv.slice(2);
const [name, ...args] = argv[0] && !argv[0].startsWith('-') ? argv : ['compare', ...argv];
if (!names.includes(name!)) {
  console.log(`usage: npm run bench [-- <${names.join('|')}>] [options]`);
  process.exit(2);
}
const mod = await import(`./${name}.ts`);
await mod.main(args);
