/**
 * The protocol client shared by ctxd's TypeScript hosts (the VS Code extension, pi's extension):
 * spawns `ctxd serve`, speaks JSON-RPC 2.0 with LSP framing over its stdio (./jsonrpc), and exposes
 * every ctxd method and notification with types. It imports no host API, so its tests run it
 * against a real daemon.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import {
  Connection,
  Emitter,
  ResponseError,
  type CancellationToken,
  type Event,
} from './jsonrpc';
import {
  Method,
  errorKind,
  type ErrorKind,
  Notification,
  type BranchParams,
  type BranchResult,
  type BranchSummarizeParams,
  type BranchSummarizeResult,
  type CompactFactsResult,
  type CompactSummarizeParams,
  type CompactSummarizeResult,
  type ContextTruncateParams,
  type ContextTruncateResult,
  type HistoryExpandParams,
  type HistoryExpandResult,
  type HistorySearchParams,
  type HistorySearchResult,
  type SessionFactsResult,
  type CompactParams,
  type CompactResult,
  type CompactionPlan,
  type CompactionStatus,
  type Composition,
  type ContextBuildParams,
  type ContextCompositionParams,
  type SessionAppendParams,
  type SessionCreateParams,
  type SessionListParams,
  type ContextBuildResult,
  type ContextUsage,
  type CtxdCapabilities,
  type DidChange,
  type DidCreate,
  type DidDelete,
  type ForkResult,
  type InitializationOptions,
  type InitializeResult,
  type LabelResult,
  type PinResult,
  type LedgerResult,
  type SessionArchiveResult,
  type CompactPromptResult,
  type SessionEntryResult,
  type SessionInfo,
  type SessionListResult,
  type SessionTreeParams,
  type SessionTreeResult,
  type WorkDoneProgress,
} from './protocol';

export interface ClientOptions {
  /** argv of the daemon, e.g. ["ctxd", "serve"]. */
  command: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  initializationOptions?: InitializationOptions;
  /** Where the daemon's stderr and the client's own notes go (one output channel in VS Code). */
  log?: (line: string) => void;
  clientName?: string;
  clientVersion?: string;
  /** Bound on initialize and on shutdown; requests themselves are not timed out. */
  startTimeoutMs?: number;
  /** How the host's user changes the command, for start-up errors (e.g. "set ctxd.server.command"). */
  commandHint?: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** true when stop() asked for it. */
  expected: boolean;
}

/** A failed request, with a message a person can read. */
export class CtxdError extends Error {
  constructor(
    message: string,
    readonly method: string,
    readonly code: number | undefined,
    readonly data: unknown,
  ) {
    super(message);
    this.name = 'CtxdError';
  }

  /** What the code means (ctxd's codes, either numbering). */
  get kind(): ErrorKind | undefined {
    return errorKind(this.code);
  }

  get cancelled(): boolean {
    return this.kind === 'cancelled';
  }
}

const KIND_NAMES: Record<ErrorKind, string> = {
  invalidParams: 'invalid params',
  internal: 'internal error',
  refused: 'refused',
  unknownSession: 'unknown session',
  unknownEntry: 'unknown entry',
  invalidEntry: 'invalid entry',
  unusableSession: 'unusable session file',
  badHeader: 'bad session header',
  unsupportedVersion: 'unsupported session version',
  readOnlySession: 'read-only session',
  compactionFailed: 'compaction failed',
  historyUnavailable: 'history unavailable',
  cancelled: 'cancelled',
};

/** "compaction failed: nothing to compact: ..." from a JSON-RPC error, without repeating itself. */
export function readableError(method: string, error: unknown): CtxdError {
  if (error instanceof CtxdError) {
    return error;
  }
  if (error instanceof ResponseError) {
    const kind = errorKind(error.code);
    const name = kind ? KIND_NAMES[kind] : undefined;
    const message = String(error.message || name || 'error');
    const field = isRecord(error.data) && typeof error.data.field === 'string' ? ` (field ${error.data.field})` : '';
    const prefix = name && !message.toLowerCase().startsWith(name) ? `${name}: ` : '';
    return new CtxdError(`${prefix}${message}${field}`, method, error.code, error.data);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CtxdError(message, method, undefined, undefined);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Split a command line as a shell would for plain words and quotes (no expansion). */
export function splitCommand(line: string): string[] {
  const out: string[] = [];
  let current = '';
  let quote: '"' | "'" | null = null;
  let started = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) {
        quote = null;
      } else if (ch === '\\' && quote === '"' && i + 1 < line.length) {
        current += line[++i];
      } else {
        current += ch;
      }
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      started = true;
    } else if (ch === '\\' && i + 1 < line.length) {
      current += line[++i];
      started = true;
    } else if (/\s/.test(ch)) {
      if (started) {
        out.push(current);
        current = '';
        started = false;
      }
    } else {
      current += ch;
      started = true;
    }
  }
  if (started) {
    out.push(current);
  }
  return out;
}

type State = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

export class CtxdClient {
  private process: ChildProcess | undefined;
  private connection: Connection | undefined;
  private state: State = 'idle';
  private stopping = false;
  private exitPromise: Promise<ExitInfo> | undefined;
  private nextToken = 1;
  private readonly progress = new Map<string | number, (value: WorkDoneProgress) => void>();
  capabilities: CtxdCapabilities | undefined;
  serverVersion: string | undefined;

  private readonly didChangeEmitter = new Emitter<DidChange>();
  private readonly didCreateEmitter = new Emitter<DidCreate>();
  private readonly didDeleteEmitter = new Emitter<DidDelete>();
  private readonly compactionEmitter = new Emitter<CompactionStatus>();
  private readonly usageEmitter = new Emitter<ContextUsage>();
  private readonly compositionEmitter = new Emitter<Composition>();
  private readonly logEmitter = new Emitter<{ type: number; message: string }>();
  private readonly exitEmitter = new Emitter<ExitInfo>();

  readonly onDidChange: Event<DidChange> = this.didChangeEmitter.event;
  readonly onDidCreate: Event<DidCreate> = this.didCreateEmitter.event;
  readonly onDidDelete: Event<DidDelete> = this.didDeleteEmitter.event;
  readonly onCompactionStatus: Event<CompactionStatus> = this.compactionEmitter.event;
  readonly onContextUsage: Event<ContextUsage> = this.usageEmitter.event;
  /** context/compositionChanged: a followed session's composition after a change. */
  readonly onCompositionChanged: Event<Composition> = this.compositionEmitter.event;
  /** window/logMessage from the daemon (type: 1 error, 2 warning, 3 info, 4 log). */
  readonly onLogMessage: Event<{ type: number; message: string }> = this.logEmitter.event;
  readonly onExit: Event<ExitInfo> = this.exitEmitter.event;

  constructor(private readonly options: ClientOptions) {}

  get running(): boolean {
    return this.state === 'running';
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  private log(line: string): void {
    this.options.log?.(line);
  }

  /** Spawn the daemon, initialize it, and resolve with its ctxd capabilities. */
  async start(): Promise<CtxdCapabilities | undefined> {
    if (this.state !== 'idle') {
      throw new Error(`the client was already started (${this.state})`);
    }
    const [program, ...args] = this.options.command;
    if (!program) {
      const hint = this.options.commandHint ? `: ${this.options.commandHint}` : '';
      throw new CtxdError(`the ctxd server command is empty${hint}`, 'start', undefined, undefined);
    }
    this.state = 'starting';
    this.log(`[client] starting ${this.options.command.join(' ')}`);
    const child = spawn(program, args, {
      cwd: this.options.cwd,
      env: this.options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.process = child;
    let spawnError: Error | undefined;
    this.exitPromise = new Promise<ExitInfo>((resolve) => {
      child.once('error', (err) => {
        spawnError = err;
        const info = { code: null, signal: null, expected: this.stopping };
        this.finish(info);
        resolve(info);
      });
      child.once('exit', (code, signal) => {
        const info = { code, signal, expected: this.stopping };
        this.finish(info);
        resolve(info);
      });
    });
    let stderrTail = '';
    child.stderr!.setEncoding('utf8');
    let pending = '';
    child.stderr!.on('data', (chunk: string) => {
      stderrTail = (stderrTail + chunk).slice(-2000);
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        this.log(line);
      }
    });
    child.stderr!.on('end', () => {
      if (pending) {
        this.log(pending);
      }
    });

    const connection = new Connection(child.stdout!, child.stdin!);
    this.connection = connection;
    connection.onNotification(Notification.didChange, (p: DidChange) => this.didChangeEmitter.fire(p));
    connection.onNotification(Notification.didCreate, (p: DidCreate) => this.didCreateEmitter.fire(p));
    connection.onNotification(Notification.didDelete, (p: DidDelete) => this.didDeleteEmitter.fire(p));
    connection.onNotification(Notification.compactionStatus, (p: CompactionStatus) => this.compactionEmitter.fire(p));
    connection.onNotification(Notification.contextUsage, (p: ContextUsage) => this.usageEmitter.fire(p));
    connection.onNotification(Notification.compositionChanged, (p: Composition) => this.compositionEmitter.fire(p));
    connection.onNotification('window/logMessage', (p: { type: number; message: string }) => {
      this.log(`[server] ${p.message}`);
      this.logEmitter.fire(p);
    });
    connection.onNotification('$/progress', (p: { token: string | number; value: WorkDoneProgress }) => {
      this.progress.get(p.token)?.(p.value);
    });
    connection.onRequest('window/workDoneProgress/create', () => null);
    connection.onError((error) => this.log(`[client] connection error: ${error.message}`));
    connection.listen();

    const timeout = this.options.startTimeoutMs ?? 30_000;
    const init = connection.sendRequest<InitializeResult>('initialize', {
      processId: process.pid,
      clientInfo: { name: this.options.clientName ?? 'ctxd-client', version: this.options.clientVersion ?? '0' },
      rootUri: null,
      capabilities: { window: { workDoneProgress: true }, experimental: { ctxd: { notifications: true } } },
      initializationOptions: this.options.initializationOptions ?? {},
    });
    let timer: NodeJS.Timeout | undefined;
    const exitError = (info: ExitInfo): CtxdError => {
      const why = spawnError
        ? `could not start "${this.options.command.join(' ')}": ${spawnError.message}` +
          (this.options.commandHint ? ` (${this.options.commandHint})` : '')
        : `the ctxd server exited during startup (code ${info.code}${info.signal ? `, ${info.signal}` : ''})` +
          (stderrTail.trim() ? `: ${lastLine(stderrTail)}` : '');
      return new CtxdError(why, 'initialize', undefined, undefined);
    };
    try {
      const result = await Promise.race([
        init.catch(async (error: unknown) => {
          // A dying daemon rejects initialize first; its exit (and stderr) says why.
          const info = await Promise.race([this.exitPromise!, delay(1000).then(() => undefined)]);
          throw info ? exitError(info) : error;
        }),
        this.exitPromise.then((info) => {
          throw exitError(info);
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new CtxdError(`the ctxd server did not answer initialize within ${timeout} ms`, 'initialize', undefined, undefined)),
            timeout,
          );
        }),
      ]);
      this.capabilities = result.capabilities.experimental?.ctxd;
      this.serverVersion = this.capabilities?.version ?? result.serverInfo?.version;
      await connection.sendNotification('initialized', {});
      this.state = 'running';
      this.log(`[client] ctxd ${this.serverVersion ?? '?'} running (pid ${child.pid})`);
      return this.capabilities;
    } catch (error) {
      this.kill();
      throw error instanceof CtxdError ? error : readableError('initialize', error);
    } finally {
      clearTimeout(timer);
    }
  }

  private finish(info: ExitInfo): void {
    if (this.state === 'stopped') {
      return;
    }
    const wasRunning = this.state === 'running';
    this.state = 'stopped';
    this.connection?.dispose();
    for (const [, report] of this.progress) {
      report({ kind: 'end', message: 'the server exited' });
    }
    this.progress.clear();
    if (wasRunning || info.expected) {
      this.log(`[client] ctxd exited (code ${info.code}${info.signal ? `, signal ${info.signal}` : ''})`);
    }
    this.exitEmitter.fire(info);
  }

  private kill(): void {
    if (this.process && this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill('SIGKILL');
    }
  }

  /** shutdown + exit, then SIGTERM/SIGKILL if the daemon does not leave in time. */
  async stop(): Promise<void> {
    if (!this.process || this.state === 'stopped' || this.state === 'idle') {
      this.state = 'stopped';
      return;
    }
    this.stopping = true;
    const exited = this.exitPromise!;
    const wait = (ms: number) => Promise.race([exited.then(() => true), delay(ms).then(() => false)]);
    if (this.state === 'running' && this.connection) {
      this.state = 'stopping';
      try {
        await Promise.race([this.connection.sendRequest('shutdown'), delay(2000)]);
        await this.connection.sendNotification('exit');
      } catch {
        // the connection may be gone already
      }
    }
    if (!(await wait(2000))) {
      this.process.kill('SIGTERM');
      if (!(await wait(2000))) {
        this.kill();
        await wait(2000);
      }
    }
  }

  dispose(): void {
    void this.stop();
    for (const emitter of [
      this.didChangeEmitter,
      this.didCreateEmitter,
      this.didDeleteEmitter,
      this.compositionEmitter,
      this.compactionEmitter,
      this.usageEmitter,
      this.logEmitter,
    ]) {
      emitter.dispose();
    }
  }

  /** Send a request; errors become CtxdError with a readable message. */
  async request<R>(method: string, params: unknown, token?: CancellationToken): Promise<R> {
    const connection = this.connection;
    if (!connection || this.state !== 'running') {
      throw new CtxdError('the ctxd server is not running', method, undefined, undefined);
    }
    try {
      return token
        ? await connection.sendRequest<R>(method, params, token)
        : await connection.sendRequest<R>(method, params);
    } catch (error) {
      throw readableError(method, error);
    }
  }

  // --- the methods ------------------------------------------------------------------------------

  listSessions(params: SessionListParams = {}): Promise<SessionListResult> {
    return this.request(Method.sessionList, params);
  }

  openSession(session: string): Promise<SessionInfo> {
    return this.request(Method.sessionOpen, { session });
  }

  createSession(params: SessionCreateParams): Promise<SessionInfo> {
    return this.request(Method.sessionCreate, params);
  }

  append(params: SessionAppendParams): Promise<{ ids: string[]; leafId: string | null; usage: ContextUsage; compactionDue: boolean; reason: string | null }> {
    return this.request(Method.sessionAppend, params);
  }

  tree(params: SessionTreeParams): Promise<SessionTreeResult> {
    return this.request(Method.sessionTree, params);
  }

  entry(session: string, entryId: string): Promise<SessionEntryResult> {
    return this.request(Method.sessionEntry, { session, entryId });
  }

  label(session: string, entryId: string, label: string | null): Promise<LabelResult> {
    return this.request(Method.sessionLabel, { session, entryId, label });
  }

  /** Pin (or, with ``pinned`` false, unpin) a message: compactions carry it verbatim after the summary. */
  pin(session: string, entryId: string, pinned: boolean): Promise<PinResult> {
    return this.request(Method.sessionPin, { session, entryId, pinned });
  }

  fork(session: string, entryId: string): Promise<ForkResult> {
    return this.request(Method.sessionFork, { session, entryId });
  }

  stats(session: string): Promise<Record<string, unknown>> {
    return this.request(Method.sessionStats, { session });
  }

  /** Whether the daemon offers a method (from initialize's capabilities.experimental.ctxd). */
  supports(method: string): boolean {
    return this.capabilities?.methods.includes(method) ?? false;
  }

  /** session/ledger: every compaction, newest first (daemons that advertise it). */
  ledger(session: string): Promise<LedgerResult> {
    return this.request(Method.sessionLedger, { session });
  }

  /** context/composition: what fills the context, its heaviest entries, how it grew. Asked at the
   * leaf, the daemon follows the session: see onCompositionChanged. */
  composition(session: string, params: Omit<ContextCompositionParams, 'session'> = {}): Promise<Composition> {
    return this.request(Method.contextComposition, { ...params, session });
  }

  buildContext(params: ContextBuildParams): Promise<ContextBuildResult> {
    return this.request(Method.contextBuild, params);
  }

  previewCompaction(session: string, params: Omit<CompactParams, 'session' | 'dryRun'> = {}): Promise<CompactionPlan> {
    return this.request(Method.compact, { ...params, session, dryRun: true });
  }

  /**
   * Compact now. ``onProgress`` receives the daemon's $/progress reports (begin, report, end);
   * cancelling ``token`` sends $/cancelRequest.
   */
  async compact(
    session: string,
    params: Omit<CompactParams, 'session' | 'dryRun' | 'workDoneToken'> = {},
    onProgress?: (value: WorkDoneProgress) => void,
    token?: CancellationToken,
  ): Promise<CompactResult> {
    const workDoneToken = onProgress ? `ctxd-compact-${this.nextToken++}` : undefined;
    if (workDoneToken && onProgress) {
      this.progress.set(workDoneToken, onProgress);
    }
    try {
      return await this.request<CompactResult>(
        Method.compact,
        { ...params, session, dryRun: false, ...(workDoneToken ? { workDoneToken } : {}) },
        token,
      );
    } finally {
      if (workDoneToken) {
        this.progress.delete(workDoneToken);
      }
    }
  }

  branch(params: BranchParams): Promise<BranchResult> {
    return this.request(Method.branch, params);
  }

  /**
   * compact/summarize: the summary of a compaction the agent prepared; nothing is written.
   * Cancelling ``token`` sends $/cancelRequest (the daemon stops the model call).
   */
  summarizeCompaction(params: CompactSummarizeParams, token?: CancellationToken): Promise<CompactSummarizeResult> {
    return this.request(Method.compactSummarize, params, token);
  }

  /** branch/summarize: the summary of a branch the agent is leaving; nothing is written. */
  summarizeBranch(params: BranchSummarizeParams, token?: CancellationToken): Promise<BranchSummarizeResult> {
    return this.request(Method.branchSummarize, params, token);
  }

  /** context/truncate: the messages with oversized tool results cut for a window. */
  truncate(params: ContextTruncateParams): Promise<ContextTruncateResult> {
    return this.request(Method.contextTruncate, params);
  }

  /** history/search: ranked hits from every session's history (the daemon's FTS5 index). */
  searchHistory(params: HistorySearchParams, token?: CancellationToken): Promise<HistorySearchResult> {
    return this.request(Method.historySearch, params, token);
  }

  /** session/facts: the session's fact ledger, read-only (daemons that advertise it). */
  sessionFacts(session: string, token?: CancellationToken): Promise<SessionFactsResult> {
    return this.request(Method.sessionFacts, { session }, token);
  }

  /** session/archive: copy an opencode session into ctxd's archive (daemons that advertise it). */
  archiveSession(session: string): Promise<SessionArchiveResult> {
    return this.request(Method.sessionArchive, { session });
  }

  /** compact/prompt: the summary's shape and ctxd's compaction prompt, for an agent's own summariser. */
  compactPrompt(): Promise<CompactPromptResult> {
    return this.request(Method.compactPrompt, {});
  }

  /** compact/facts: an opencode session's must-keep facts around opencode's own compactions (daemons that
   * advertise it). */
  compactFacts(session: string): Promise<CompactFactsResult> {
    return this.request(Method.compactFacts, { session });
  }

  /** history/expand: the original messages behind a summary, of an entry, or of a range, in pages. */
  expandHistory(params: HistoryExpandParams, token?: CancellationToken): Promise<HistoryExpandResult> {
    return this.request(Method.historyExpand, params, token);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1]!.trim();
}

