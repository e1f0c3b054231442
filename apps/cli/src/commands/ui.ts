// `cmesh ui`: the link that opens a coordinator's live page (/ui) in a browser. With an API token
// (read where `cmesh status` reads it) the link is the login link: it carries a login token made
// from the API token, never the API token, and the coordinator trades it for a read-only session
// cookie (see "The live page" in the operations guide). The link is checked against the
// coordinator first, so a wrong token or address is said here rather than in the browser.
import { spawn } from 'child_process';
import { Command } from 'commander';
import { UI_PATH, uiLoginLink } from '@cmesh/protocol';
import { DEFAULT_COORDINATOR, clientToken } from '../mesh/client';
import { UsageError } from '../usage';

export class UiLinkError extends Error {
  override name = 'UiLinkError';
}

/** The coordinator's base URL, or a UsageError (exit 2) naming what is wrong with it. */
export function coordinatorBase(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`--coordinator ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:7700)`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`--coordinator ${JSON.stringify(url)}: http:// or https:// only`);
  return url.replace(/\/+$/, '');
}

/**
 * Asks the coordinator whether `link` gets a browser in: the login link must answer 303 (a session
 * cookie and on to /ui), the page itself 200. Nothing is kept of the answer.
 */
export async function checkUiLink(link: string, timeoutMs = 10_000): Promise<void> {
  let res: Response;
  try {
    res = await fetch(link, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
    throw new UiLinkError(`coordinator ${new URL(link).origin} unreachable (${cause}); is the mesh up (cmesh up)?`);
  }
  await res.body?.cancel();
  const login = new URL(link).pathname !== UI_PATH;
  if (login ? res.status === 303 : res.status === 200) return;
  if (res.status === 401) {
    throw new UiLinkError(
      login
        ? `the coordinator did not accept the login token: the API token here (CMESH_API_TOKEN, --token-file, or cmesh up's) is not one of ${new URL(link).origin}'s`
        : `the coordinator asks for a token: set CMESH_API_TOKEN or CMESH_API_TOKEN_FILE, or pass --token-file`,
    );
  }
  if (res.status === 404) throw new UiLinkError(`${new URL(link).origin} has no live page (${res.status}): is it a cmesh coordinator of this version?`);
  throw new UiLinkError(`${new URL(link).origin} answered ${res.status} to the live page's link`);
}

/** The platform's "open this URL" command, detached: the browser outlives this process. */
function openInBrowser(link: string): void {
  const [cmd, args] =
    process.platform === 'darwin' ? ['open', [link]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', link]] : ['xdg-open', [link]];
  const child = spawn(cmd, args, { detached: true, stdio: 'ignore' });
  child.on('error', (e) => console.error(`cmesh ui: could not start ${cmd} (${e.message}); open the link above by hand`));
  child.unref();
}

export function register(program: Command): void {
  program
    .command('ui')
    .description("print the link that opens the coordinator's live page (/ui) in a browser (a login link when the API asks for a token)")
    .option('--coordinator <url>', 'coordinator REST address (or CMESH_COORDINATOR)', DEFAULT_COORDINATOR)
    .option(
      '--token-file <path>',
      "file holding the coordinator's API token (or CMESH_API_TOKEN / CMESH_API_TOKEN_FILE; default for a local coordinator: cmesh up's)",
    )
    .option('--open', 'also open the link in the default browser (xdg-open, open)')
    .option('--no-check', 'print the link without asking the coordinator whether it lets a browser in')
    .action(async (o: { coordinator: string; tokenFile?: string; open?: boolean; check: boolean }) => {
      const base = coordinatorBase(o.coordinator);
      const link = uiLoginLink(base, clientToken(base, o.tokenFile));
      if (o.check) await checkUiLink(link);
      process.stdout.write(link + '\n');
      if (o.open) openInBrowser(link);
    });
}
