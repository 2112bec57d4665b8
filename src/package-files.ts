// Files that ship beside the code: the pages' CSS and scripts, package.json. They are found from
// this module's directory, src/ (or dist/src/ when built): the build bundles every module into a few
// files directly in dist/src/, where a module's own URL no longer says which directory it came from.

const SOURCE_ROOT = new URL('./', import.meta.url);

/** A shipped file, by its path relative to src/ (`web/static/style.css`, `../package.json`). */
export function packageFile(path: string): URL {
  return new URL(path, SOURCE_ROOT);
}
