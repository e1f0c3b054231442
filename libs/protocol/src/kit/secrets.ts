// Secrets a process is given (API tokens, NATS passwords): from a variable, or from the file a
// `<NAME>_FILE` variable points to (a mounted Kubernetes Secret, a compose secret, a state
// directory). Never from a flag, which any user on the host could read in the process list; and
// never echoed: errors name the variable, not the value.

/** Too short to be worth guessing against. */
export const MIN_SECRET_LENGTH = 16;

export class SecretSettingError extends Error {
  override name = 'SecretSettingError';
}

/**
 * The value of `name`, else the trimmed contents of the file `${name}_FILE` names, else undefined.
 * Both set, or a value shorter than MIN_SECRET_LENGTH, is a SecretSettingError.
 */
export function readSecretSetting(name: string, env: NodeJS.ProcessEnv, readFile: (path: string) => string): string | undefined {
  const direct = env[name] || undefined;
  const file = env[`${name}_FILE`] || undefined;
  if (direct && file) throw new SecretSettingError(`${name} and ${name}_FILE are both set; set one`);
  let value = direct;
  if (file) {
    try {
      value = readFile(file).trim();
    } catch (e) {
      throw new SecretSettingError(`${name}_FILE: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  if (value !== undefined && value.length < MIN_SECRET_LENGTH) {
    throw new SecretSettingError(
      `${name}${file ? '_FILE' : ''} holds ${value.length} characters; at least ${MIN_SECRET_LENGTH} (e.g. 32 random bytes in base64)`,
    );
  }
  return value;
}
