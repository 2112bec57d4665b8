// npm run check: the Dockerfile has no problem dockerfile-utils reports (every check on, warnings
// count) and is formatted as dockerfile-utils formats it.
//
//   node scripts/lint-dockerfile.ts [Dockerfile ...]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { format, validate, ValidationSeverity, type ValidatorSettings } from 'dockerfile-utils';

const ROOT = join(import.meta.dirname, '..');
const files = process.argv.length > 2 ? process.argv.slice(2) : [join(ROOT, 'Dockerfile')];

const strict: Required<ValidatorSettings> = {
  deprecatedMaintainer: ValidationSeverity.ERROR,
  directiveCasing: ValidationSeverity.ERROR,
  emptyContinuationLine: ValidationSeverity.ERROR,
  instructionCasing: ValidationSeverity.ERROR,
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  instructionWorkdirRelative: ValidationSeverity.ERROR,
};

let problems = 0;
for (const file of files) {
  const content = readFileSync(file, 'utf8');
  for (const d of validate(content, strict)) {
    problems++;
    const message = typeof d.message === 'string' ? d.message : d.message.value;
    console.error(`${file}:${d.range.start.line + 1}:${d.range.start.character + 1}: ${message}`);
  }
  for (const edit of format(content, { insertSpaces: true, tabSize: 4 })) {
    problems++;
    const line = edit.range.start.line + 1;
    console.error(
      `${file}:${line}: not formatted (dockerfile-utils format would write ${JSON.stringify(edit.newText)})`,
    );
  }
}
if (problems) {
  console.error(`${problems} Dockerfile problem${problems === 1 ? '' : 's'}`);
  process.exit(1);
}
console.log(`Dockerfile lint: ${files.length} file${files.length === 1 ? '' : 's'}, no problems`);
