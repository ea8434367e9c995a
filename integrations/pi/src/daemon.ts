/**
 * The extension's own `ctxd serve`: started when a pi session starts, stopped when it ends (LSP
 * shutdown + exit, then signals), restarted on demand if it died. The daemon also exits by itself
 * when its stdin closes, so a pi that is killed leaves no ctxd behind.
 *
 * It serves pi's sessions folder but never writes there: pi writes the entries ctxd summarises
 * (automatic compaction is off, and nothing is watched).
 */

import { appendFileSync } from 'node:fs';
import { CtxdClient, CtxdError, Emitter } from './client';
import type { Settings } from './settings';

const MAX_RESTARTS = 3;
const LOG_LINES = 200;

export class Daemon {
  private client: CtxdClient | undefined;
  private starting: Promise<CtxdClient | undefined> | undefined;
  private restarts = 0;
  private stopped = false;
  /** Why the daemon is not available (a start-up failure or an unexpected exit). */
  problem: string | undefined;
  readonly lines: string[] = [];

  constructor(
    private readonly settings: Settings,
    private readonly root: string,
    private readonly cwd: string,
    private readonly version: string,
    private readonly onProblem: (message: string) => void,
  ) {
    // A failing listener of the client's events is a bug of this extension: log it, never break pi.
    Emitter.onListenerError = (error) => this.log(`[ctxd-pi] listener failed: ${String(error)}`);
  }

  log(line: string): void {
    this.lines.push(line);
    if (this.lines.length > LOG_LINES) {
      this.lines.splice(0, this.lines.length - LOG_LINES);
    }
    if (this.settings.logFile) {
      try {
        appendFileSync(this.settings.logFile, `${new Date().toISOString()} ${line}\n`);
      } catch {
        // a log that cannot be written must not break pi
      }
    }
  }

  get pid(): number | undefined {
    return this.client?.running ? this.client.pid : undefined;
  }

  /** Start the daemon in the background; `ready()` waits for it. */
  start(): void {
    void this.ready();
  }

  /** The running client, starting (or restarting) the daemon if needed; undefined if it cannot run. */
  async ready(): Promise<CtxdClient | undefined> {
    if (this.stopped) {
      return undefined;
    }
    if (this.client?.running) {
      return this.client;
    }
    if (!this.starting) {
      if (this.client && this.restarts >= MAX_RESTARTS) {
        return undefined;
      }
      if (this.client) {
        this.restarts++;
      }
      this.starting = this.spawn().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async spawn(): Promise<CtxdClient | undefined> {
    const client = new CtxdClient({
      command: this.settings.command,
      cwd: this.cwd,
      env: process.env,
      clientName: 'ctxd-pi',
      clientVersion: this.version,
      commandHint: 'install ctxd, or set "ctxd": {"command": ...} in pi\'s settings.json or CTXD_PI_COMMAND',
      log: (line) => this.log(line),
      // The daemon serves pi's sessions but never writes or watches them: pi owns its file.
      initializationOptions: {
        roots: [this.root],
        transcriptRoots: [],
        watch: false,
        autoCompact: false,
        client: { name: 'ctxd-pi', version: this.version },
      },
    });
    this.client = client;
    let started = false;
    client.onExit((info) => {
      if (started && !info.expected && !this.stopped) {
        this.problem = `ctxd exited unexpectedly (code ${info.code}${info.signal ? `, ${info.signal}` : ''})`;
        this.log(`[ctxd-pi] ${this.problem}`);
        this.onProblem(`${this.problem}; pi's own compaction is used until it restarts`);
      }
    });
    try {
      await client.start();
      started = true;
      this.problem = undefined;
      this.log(`[ctxd-pi] ctxd ${client.serverVersion ?? '?'} serving ${this.root} (pid ${client.pid})`);
      return client;
    } catch (error) {
      this.problem = error instanceof CtxdError ? error.message : String(error);
      this.log(`[ctxd-pi] ${this.problem}`);
      this.onProblem(`ctxd could not start: ${this.problem}. pi compacts on its own.`);
      if (/could not start|command is empty/.test(this.problem)) {
        this.restarts = MAX_RESTARTS; // a command that cannot be run will not run on the next try
      }
      return undefined;
    }
  }

  /** LSP shutdown + exit, then SIGTERM/SIGKILL; idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    const starting = this.starting;
    if (starting) {
      await starting.catch(() => undefined);
    }
    const client = this.client;
    this.client = undefined;
    if (client) {
      await client.stop();
      client.dispose();
    }
  }
}
