// A process's configuration as ONE zod object schema: each field is a setting with its
// environment variable, its flag, a line of help and a default (the schema's own, or a text for
// a default computed at start-up). loadSettings reads the environment, lets flags override it
// (`--flag value` or `--flag=value`) and parses the result with the schema; settingsHelp prints
// the same table for `--help`. The coordinator and the rank agent each have one such schema.
import { z } from 'zod';

export interface SettingMeta {
  /** the environment variable */
  env: string;
  /** the command-line flag, with its dashes */
  flag: string;
  help: string;
  /** shown for a default computed at start-up (a host name, another setting) */
  defaultText?: string;
}

/** Where each setting's SettingMeta is kept (zod's registry, keyed by the field's schema). */
export const settingsRegistry = z.registry<SettingMeta>();

/** A field of a settings schema: `schema` parses the variable's text (undefined when unset). */
export function setting<S extends z.ZodType>(schema: S, meta: SettingMeta): S {
  settingsRegistry.add(schema, meta);
  return schema;
}

/** An integer in [min, max] from its text, named in the error with its bounds. */
export function intSetting(min: number, max: number) {
  const msg = `must be an integer in [${min}, ${max}]`;
  return z
    .string()
    .trim()
    .regex(/^-?\d+$/, msg)
    .transform(Number)
    .pipe(z.number().int().min(min, msg).max(max, msg));
}

/** A setting the process cannot run with: names the variable, the flag and what is wrong. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

type Settings = z.ZodObject<Record<string, z.ZodType>>;

function metaOf(schema: Settings): [string, SettingMeta][] {
  return Object.entries(schema.shape).map(([key, field]) => {
    const meta = settingsRegistry.get(field);
    if (!meta) throw new Error(`setting ${key} has no env/flag (declare it with setting())`);
    return [key, meta];
  });
}

/** Whether the command line asks for help. */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * The settings: each field's variable from `env`, a flag in `argv` over it, parsed with the
 * schema. An unknown flag, a flag without its value or a value the schema refuses is a
 * SettingsError naming it.
 */
export function loadSettings<S extends Settings>(schema: S, argv: readonly string[], env: NodeJS.ProcessEnv): z.output<S> {
  const fields = metaOf(schema);
  const byFlag = new Map(fields.map(([key, m]) => [m.flag, key]));
  const raw: Record<string, string | undefined> = Object.fromEntries(fields.map(([key, m]) => [key, env[m.env]]));
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const key = byFlag.get(flag);
    if (!key) throw new SettingsError(`unknown flag ${flag}; known: ${[...byFlag.keys()].join(' ')} --help`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new SettingsError(`${flag} needs a value`);
    raw[key] = value;
  }
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const meta = new Map(fields);
  const lines = r.error.issues.map((iss) => {
    const key = String(iss.path[0] ?? '');
    const m = meta.get(key);
    return m ? `${m.env} (${m.flag}): ${iss.message}, got ${JSON.stringify(raw[key])}` : iss.message;
  });
  throw new SettingsError(lines.join('; '));
}

/** The default a setting shows: its text, or the schema's default value. */
export function settingDefault(field: z.ZodType, meta: SettingMeta): string | undefined {
  if (meta.defaultText) return meta.defaultText;
  const r = field.safeParse(undefined);
  if (!r.success || r.data === undefined) return undefined;
  return typeof r.data === 'string' ? r.data : JSON.stringify(r.data);
}

/** `--help`: usage, then one line per setting: flag, variable, default, help. */
export function settingsHelp(schema: Settings, usage: string): string {
  const rows = metaOf(schema).map(([key, m]) => {
    const d = settingDefault(schema.shape[key], m);
    return [`${m.flag} <value>`, m.env, d === undefined ? '' : `(default ${d})`, m.help];
  });
  const w = [0, 1].map((c) => Math.max(...rows.map((r) => r[c].length)));
  const lines = rows.map((r) => `  ${r[0].padEnd(w[0])}  ${r[1].padEnd(w[1])}  ${r[3]}${r[2] ? ` ${r[2]}` : ''}`);
  const help = `  ${'--help, -h'.padEnd(w[0])}  ${''.padEnd(w[1])}  this text`;
  return [`usage: ${usage}`, '', 'Each flag overrides its environment variable.', '', ...lines, help, ''].join('\n');
}
