// A service member in a process of its own (support/member.ts through @cmesh/client, a plain
// JavaScript member, or an example in TypeScript or Python) and the JSON lines it prints (the
// rest in `out`), for the tests on a real mesh.
import { ChildProcess, spawn } from 'child_process';
import { join } from 'path';
import { nodeArgs, programEnv } from '@cmesh/testing/mesh';

export const TS_MEMBER = join(__dirname, 'member.ts');
export const RAW_MEMBER = join(__dirname, 'raw-member.js');

export interface Line {
  event: string;
  /** joined: the client's path to its agent, and why not the local one */
  transport?: string;
  localUnused?: string | null;
  rank?: number;
  size?: number;
  agent?: string;
  smallUs?: number;
  largeUs?: number;
  checked?: number;
  name?: string;
  message?: string;
  peers?: number[];
  at?: number;
  refused?: string[];
  local?: boolean;
  /** joined: the backend the group runs on */
  backend?: string;
  code?: string;
  n?: number;
  /** leave-early: what the op after the leaver's last one got */
  after?: { name: string; message: string; peers?: number[] } | null;
}

export class Member {
  readonly lines: Line[] = [];
  /** what it printed besides the JSON lines (stderr included) */
  readonly out: string[] = [];
  readonly exited: Promise<number | null>;
  readonly proc: ChildProcess;

  constructor(file: string, env: Record<string, string>) {
    // a .py member runs under python3, the others under this node
    const [cmd, args] = file.endsWith('.py') ? ['python3', [file]] : [process.execPath, file.endsWith('.ts') ? nodeArgs(file) : [file]];
    this.proc = spawn(cmd, args, { env: { ...process.env, ...programEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const l = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          this.lines.push(JSON.parse(l) as Line);
        } catch {
          this.out.push(l);
        }
      }
    });
    this.proc.stderr!.on('data', (d: Buffer) => this.out.push(d.toString()));
    this.exited = new Promise((r) => this.proc.once('exit', (code) => r(code)));
  }

  async waitFor(event: string, timeoutMs: number): Promise<Line> {
    for (const end = Date.now() + timeoutMs; ; ) {
      const l = this.lines.find((x) => x.event === event);
      if (l) return l;
      if (Date.now() > end) throw new Error(`no ${event} within ${timeoutMs} ms: ${JSON.stringify(this.lines)} ${this.out.join('').slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  kill(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }
}
