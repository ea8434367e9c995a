/**
 * The daemon's lifecycle in VS Code: settings → a CtxdClient, start, stop, restart, and what
 * happens when the daemon dies. Restarting empties the views and fills them again from the new
 * daemon (the open session is opened again).
 */

import * as os from 'node:os';
import * as vscode from 'vscode';
import { CtxdClient, splitCommand } from '@ctxd/client';
import { Command, Config, ContextKey } from './constants';
import type { InitializationOptions } from '@ctxd/client';
import type { Store } from './state';

export interface ServerSettings {
  command: string[];
  env: Record<string, string>;
  initializationOptions: InitializationOptions;
}

function expandHome(path: string): string {
  return path.replace(/^~(?=$|[\\/])/, os.homedir());
}

/** Settings → how to start the daemon. Pure apart from reading the configuration object. */
export function readSettings(config: vscode.WorkspaceConfiguration, version: string): ServerSettings {
  const commandSetting = config.get<string | string[]>(Config.serverCommand, 'ctxd serve');
  const command = Array.isArray(commandSetting) ? commandSetting.map(String) : splitCommand(commandSetting || 'ctxd serve');
  const env = config.get<Record<string, string>>(Config.serverEnv, {}) ?? {};
  const roots = (config.get<string[]>(Config.sessionRoots, []) ?? []).filter((r) => typeof r === 'string' && r.trim());
  const transcripts = config.get<string[] | null>(Config.transcriptRoots, null);
  const model = (config.get<string>(Config.model, '') ?? '').trim();
  const options: InitializationOptions = {
    autoCompact: config.get<boolean>(Config.autoCompact, true) ?? true,
    client: { name: 'vscode-ctxd', version },
  };
  if (config.get<boolean>(Config.autoCompactExternal, false)) {
    options.autoCompactExternal = true;
  }
  if (roots.length) {
    options.roots = roots.map(expandHome);
  }
  if (Array.isArray(transcripts)) {
    options.transcriptRoots = transcripts.filter((r) => typeof r === 'string' && r.trim()).map(expandHome);
  }
  if (model) {
    options.model = model;
  }
  const compaction = config.get<Record<string, unknown>>(Config.compaction, {}) ?? {};
  if (compaction && typeof compaction === 'object' && Object.keys(compaction).length) {
    options.compaction = { ...compaction };
  }
  return { command, env: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])), initializationOptions: options };
}

export class ServerManager implements vscode.Disposable {
  private current: CtxdClient | undefined;
  private starting: Promise<void> | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private clientSubscriptions: vscode.Disposable[] = [];
  private disposed = false;

  constructor(
    private readonly store: Store,
    private readonly output: vscode.OutputChannel,
    private readonly version: string,
  ) {
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => {
        const keys = [
          Config.serverCommand,
          Config.serverEnv,
          Config.sessionRoots,
          Config.transcriptRoots,
          Config.model,
          Config.autoCompact,
          Config.autoCompactExternal,
          Config.compaction,
        ];
        if (keys.some((k) => e.affectsConfiguration(`${Config.section}.${k}`))) {
          this.output.appendLine('[client] settings changed: restarting the server');
          void this.restart();
        }
      }),
    );
  }

  get client(): CtxdClient | undefined {
    return this.current?.running ? this.current : undefined;
  }

  /** Start the daemon unless it runs; errors are reported to the user, not thrown. */
  start(): Promise<void> {
    if (this.current?.running) {
      return Promise.resolve();
    }
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async doStart(reopen?: string): Promise<void> {
    if (this.disposed) {
      return;
    }
    const settings = readSettings(vscode.workspace.getConfiguration(Config.section), this.version);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const client = new CtxdClient({
      command: settings.command,
      cwd: folder?.scheme === 'file' ? folder.fsPath : os.homedir(),
      env: { ...process.env, ...settings.env },
      initializationOptions: settings.initializationOptions,
      log: (line) => this.output.appendLine(line),
      clientName: 'vscode-ctxd',
      commandHint: 'set ctxd.server.command',
      clientVersion: this.version,
    });
    this.current = client;
    this.store.setServerState('starting');
    let started = false;
    this.clientSubscriptions.forEach((d) => d.dispose());
    this.clientSubscriptions = [
      client.onExit((info) => {
        if (this.current !== client || !started) {
          return; // a failed start is reported once, below
        }
        void vscode.commands.executeCommand('setContext', ContextKey.serverRunning, false);
        if (!info.expected) {
          const why = `the ctxd server exited unexpectedly (code ${info.code}${info.signal ? `, signal ${info.signal}` : ''})`;
          this.store.detach('failed', why);
          void this.offerRestart(why);
        }
      }),
      client.onLogMessage((m) => {
        if (m.type <= 2) {
          void vscode.window.showWarningMessage(`ctxd: ${m.message}`);
        }
      }),
    ];
    try {
      await client.start();
      started = true;
    } catch (error) {
      if (this.current !== client) {
        return;
      }
      const message = (error as Error).message;
      this.store.detach('failed', message);
      void this.offerRestart(message);
      return;
    }
    if (this.current !== client || this.disposed) {
      await client.stop();
      return;
    }
    await vscode.commands.executeCommand('setContext', ContextKey.serverRunning, true);
    try {
      await this.store.attach(client, reopen);
    } catch (error) {
      void vscode.window.showErrorMessage(`ctxd: ${(error as Error).message}`);
    }
  }

  private async offerRestart(message: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(`ctxd: ${message}`, 'Restart Server', 'Show Log');
    if (choice === 'Restart Server') {
      await vscode.commands.executeCommand(Command.restartServer);
    } else if (choice === 'Show Log') {
      this.output.show(true);
    }
  }

  /** Stop the daemon: the views empty at once. */
  async stop(): Promise<void> {
    const client = this.current;
    this.current = undefined;
    this.clientSubscriptions.forEach((d) => d.dispose());
    this.clientSubscriptions = [];
    this.store.detach('stopped');
    void vscode.commands.executeCommand('setContext', ContextKey.serverRunning, false);
    if (client) {
      await client.stop();
      client.dispose();
    }
  }

  /** Stop, start again, and reopen the session that was open. */
  async restart(): Promise<void> {
    await this.starting?.catch(() => undefined);
    const reopen = this.store.current?.path;
    await this.stop();
    this.starting = this.doStart(reopen).finally(() => {
      this.starting = undefined;
    });
    await this.starting;
  }

  dispose(): void {
    this.disposed = true;
    this.disposables.forEach((d) => d.dispose());
    void this.stop();
  }
}
