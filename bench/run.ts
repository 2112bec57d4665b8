// npm run bench -- <name> [...]: runs bench/<name>.ts. Without a name, lists them.
import { readdirSync } from 'node:fs';

const names = readdirSync(new URL('.', import.meta.url))
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'lib.ts', 'floor-server.ts'].includes(f))
  .map((f) => f.replace(/\.ts$/, ''))
  .sort();
const [name, ...args] = process.argv.slice(2);
if (!name || !names.includes(name)) {
  console.log(`usage: npm run bench -- <${names.join('|')}>`);
  process.exit(name ? 2 : 0);
}
const mod = await import(`./${name}.ts`);
await mod.main(args);
