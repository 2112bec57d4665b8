// Files that ship beside the code: the pages' CSS and scripts, package.json. They are found from
// this module's directory, src/ (or dist/src/ when built): the build bundles every module into a few
// files directly in dist/src/, where a module's own URL no longer says which directory it came from.

import { readFileSync } from 'node:fs';

const SOURCE_ROOT = new URL('./', import.meta.url);

/** A shipped file, by its path relative to src/ (`web/static/style.css`, `../package.json`). */
export function packageFile(path: string): URL {
  return new URL(path, SOURCE_ROOT);
}

let version: string | undefined;

/** The release: the version in package.json (dist/package.json in a compiled install), 'unknown' without one. */
export function appVersion(): string {
  if (version !== undefined) return version;
  try {
    const pkg = JSON.parse(readFileSync(packageFile('../package.json'), 'utf8')) as { version?: unknown };
    version = typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    version = 'unknown';
  }
  return version;
}
