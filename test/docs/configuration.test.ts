// docs/configuration.md against the sources: every environment variable a cmesh process reads is
// documented there, and every variable documented there is read by something.
//
// Read = one of these patterns in apps/*/src, libs/*/src (TypeScript, *.spec.ts excepted) or
// native/**/*.{cpp,hpp,cc,h} (build outputs excepted), NAME in capitals:
//   process.env.NAME   process.env['NAME']   env.NAME   env['NAME']   (any object named env)
//   e.NAME                           (the config loaders' merged environment-and-flags record)
//   requireEnv(env, 'NAME')  num('NAME')   (helpers that take a variable's name)
//   const SOMETHING_VAR = 'NAME'     (a variable's name kept in a constant; also *_ENV)
//   env: 'NAME'                      (a setting of a settings schema, see @cmesh/protocol's settings.ts)
//   debuglog('cmesh')                (Node's util.debuglog reads NODE_DEBUG)
//   getenv("NAME")                   (C/C++)
// Documented = the first backticked NAME in the first cell of a table row of docs/configuration.md
// (`| \`NAME\` | ...`); a row documents one variable.
import { readFileSync, readdirSync } from 'fs';
import { join, relative, resolve } from 'path';
import { z } from 'zod';
import { settingDefault, settingsRegistry } from '@cmesh/protocol/kit';
import { CoordinatorSettings } from '@cmesh/coordinator/config';
import { AgentSettings } from '@cmesh/rank-agent/config';

const ROOT = resolve(__dirname, '../..');
const DOC = join(ROOT, 'docs/configuration.md');

const NAME = '([A-Z][A-Z0-9_]+)';
const PATTERNS: RegExp[] = [
  new RegExp(`\\bprocess\\.env\\.${NAME}\\b`, 'g'),
  new RegExp(`\\benv\\.${NAME}\\b`, 'g'),
  new RegExp(`\\b(?:process\\.)?env\\[\\s*['"]${NAME}['"]\\s*\\]`, 'g'),
  new RegExp(`\\be\\.${NAME}\\b`, 'g'),
  new RegExp(`\\b(?:requireEnv\\(\\s*\\w+\\s*,|num\\()\\s*['"]${NAME}['"]\\s*\\)`, 'g'),
  new RegExp(`\\bconst\\s+[A-Z0-9_]+_(?:VAR|ENV)\\s*=\\s*['"]${NAME}['"]`, 'g'),
  new RegExp(`\\benv:\\s*['"]${NAME}['"]`, 'g'),
  /\bdebuglog\(\s*['"]\w+['"]\s*\)()/g,
  new RegExp(`\\bgetenv\\(\\s*"${NAME}"\\s*\\)`, 'g'),
];

function walk(dir: string, keep: (file: string) => boolean, out: string[] = []): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'build' && e.name !== 'dist') walk(p, keep, out);
    } else if (keep(p)) out.push(p);
  }
  return out;
}

function packageSources(kind: 'apps' | 'libs'): string[] {
  return readdirSync(join(ROOT, kind)).flatMap((pkg) =>
    walk(join(ROOT, kind, pkg, 'src'), (f) => f.endsWith('.ts') && !f.endsWith('.spec.ts') && !f.endsWith('.d.ts')),
  );
}

/** variable name -> the files that read it */
function variablesRead(): Map<string, string[]> {
  const files = [...packageSources('apps'), ...packageSources('libs'), ...walk(join(ROOT, 'native'), (f) => /\.(cpp|hpp|cc|h)$/.test(f))];
  const found = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const re of PATTERNS) {
      for (const m of text.matchAll(re)) {
        const name = m[1] || 'NODE_DEBUG'; // the debuglog pattern names no variable itself
        const where = found.get(name) ?? [];
        const rel = relative(ROOT, file);
        if (!where.includes(rel)) where.push(rel);
        found.set(name, where);
      }
    }
  }
  return found;
}

function variablesDocumented(markdown: string): Set<string> {
  const names = new Set<string>();
  for (const line of markdown.split('\n')) {
    const m = /^\|\s*`([A-Z][A-Z0-9_]+)`/.exec(line);
    if (m) names.add(m[1]);
  }
  return names;
}

const read = variablesRead();
const documented = variablesDocumented(readFileSync(DOC, 'utf8'));

it('finds the variables the sources read (the scanner works)', () => {
  for (const name of ['NATS_URL', 'CMESH_JOBS_KEPT', 'RANK', 'MASTER_PORT', 'CMESH_SPAWN_RANK', 'CMESH_NCCL_LIB', 'LOG_LEVEL']) {
    expect([name, read.has(name)]).toEqual([name, true]);
  }
});

it('documents every environment variable the sources read', () => {
  const missing = [...read.keys()].filter((n) => !documented.has(n)).sort();
  const detail = missing.map((n) => `${n} (read in ${read.get(n)!.join(', ')})`);
  expect(detail).toEqual([]);
});

it('documents no variable that nothing reads', () => {
  const stale = [...documented].filter((n) => !read.has(n)).sort();
  expect(stale).toEqual([]);
});

/** The rows of one `## section` of the page: variable -> its cells. */
function rowsOf(markdown: string, section: string): Map<string, string[]> {
  const start = markdown.indexOf(`\n## ${section}\n`);
  const end = markdown.indexOf('\n## ', start + 1);
  const rows = new Map<string, string[]>();
  for (const line of markdown.slice(start, end < 0 ? undefined : end).split('\n')) {
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const m = /^`([A-Z][A-Z0-9_]+)`$/.exec(cells[0] ?? '');
    if (m) rows.set(m[1], cells);
  }
  return rows;
}

describe.each([
  ['Coordinator', CoordinatorSettings],
  ['Rank agent', AgentSettings],
] as const)('the %s table is its settings schema', (section, schema) => {
  it('names each setting with its flag and default', () => {
    const rows = rowsOf(readFileSync(DOC, 'utf8'), section);
    for (const field of Object.values(schema.shape) as z.ZodType[]) {
      const meta = settingsRegistry.get(field)!;
      const cells = rows.get(meta.env);
      expect([meta.env, cells?.[1]]).toEqual([meta.env, `\`${meta.flag}\``]);
      const d = settingDefault(field, meta);
      // a default computed at start-up is described in words; a fixed one is shown as is
      if (!meta.defaultText) expect([meta.env, cells![2].startsWith(`\`${d}\``)]).toEqual([meta.env, true]);
    }
  });
});
