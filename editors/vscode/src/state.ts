/**
 * What the views show, kept in step with the daemon by its notifications (no polling): the session
 * list, the open session's tree rows, its compaction ledger, its context usage and any compaction
 * in progress. Views read this store and redraw on its events. No VS Code API here.
 */

import { realpath } from 'node:fs/promises';
import { Emitter, type Event } from '@ctxd/client';
import type { CtxdClient } from '@ctxd/client';
import { LIVE_MS } from './projection/sessions';
import { buildLedger, compactionIds, ledgerRowFromServer, type LedgerRow } from './projection/ledger';
import { entryRows, sliceRun } from './projection/conversation';
import {
  Method,
  type CollapsedRow,
  type CompactionStatus,
  type ContextUsage,
  type DidChange,
  type Entry,
  type SessionInfo,
  type SessionSummary,
  type SessionTreeResult,
  type TreeNodeRow,
  type TreeRow,
} from '@ctxd/client';
import type { ServerState } from './projection/status';

/** The part of CtxdClient the store uses (so tests may record calls). */
export type StoreClient = Pick<
  CtxdClient,
  | 'listSessions'
  | 'openSession'
  | 'tree'
  | 'entry'
  | 'ledger'
  | 'supports'
  | 'onDidChange'
  | 'onDidCreate'
  | 'onDidDelete'
  | 'onCompactionStatus'
  | 'onContextUsage'
>;

export interface StoreOptions {
  /** Rows asked for per page of the Conversation view. */
  pageRows?: number;
  /** Linear runs longer than this are collapsed (ctxd's `collapse`). */
  collapse?: number;
  /** Coalesce bursts of changes into one tree request. */
  debounceMs?: number;
  roots?: string[];
  now?: () => number;
}

export interface OpenSessionState {
  path: string;
  info: SessionInfo;
  tree: SessionTreeResult | undefined;
  usage: ContextUsage | undefined;
  compaction: CompactionStatus | undefined;
  /** How many rows to ask for (grows with "load more"). */
  limit: number;
}

interface Disposable {
  dispose(): void;
}

export class Store {
  private client: StoreClient | undefined;
  private subscriptions: Disposable[] = [];
  private readonly opts: Required<Omit<StoreOptions, 'roots'>> & { roots?: string[] };

  server: ServerState = 'stopped';
  serverError: string | undefined;
  sessions: SessionSummary[] = [];
  sessionsLoaded = false;
  /** Last change seen per session path (ms since the epoch), for live markers. */
  readonly changed = new Map<string, number>();
  current: OpenSessionState | undefined;
  ledger: LedgerRow[] = [];
  private ledgerEntries = new Map<string, Entry>();
  private fullRows: Promise<TreeRow[]> | undefined;
  private treeGeneration = 0;
  private treeTimer: ReturnType<typeof setTimeout> | undefined;
  private listTimer: ReturnType<typeof setTimeout> | undefined;
  private liveTimer: ReturnType<typeof setTimeout> | undefined;
  private treeLoading: Promise<void> | undefined;

  private readonly sessionsEmitter = new Emitter<void>();
  private readonly treeEmitter = new Emitter<void>();
  private readonly ledgerEmitter = new Emitter<void>();
  private readonly statusEmitter = new Emitter<void>();
  private readonly errorEmitter = new Emitter<Error>();
  private readonly compactionEmitter = new Emitter<CompactionStatus>();
  readonly onDidChangeSessions: Event<void> = this.sessionsEmitter.event;
  readonly onDidChangeTree: Event<void> = this.treeEmitter.event;
  readonly onDidChangeLedger: Event<void> = this.ledgerEmitter.event;
  readonly onDidChangeStatus: Event<void> = this.statusEmitter.event;
  /** A background refresh failed (user actions report their own errors). */
  readonly onError: Event<Error> = this.errorEmitter.event;
  /** compaction/status for the open session (after the store took it in). */
  readonly onCompaction: Event<CompactionStatus> = this.compactionEmitter.event;

  constructor(options: StoreOptions = {}) {
    this.opts = {
      pageRows: options.pageRows ?? 2000,
      collapse: options.collapse ?? 8,
      debounceMs: options.debounceMs ?? 100,
      now: options.now ?? Date.now,
      roots: options.roots,
    };
  }

  get now(): number {
    return this.opts.now();
  }

  get connected(): boolean {
    return this.client !== undefined && this.server === 'running';
  }

  setServerState(state: ServerState, error?: string): void {
    this.server = state;
    this.serverError = error;
    this.statusEmitter.fire();
  }

  /** Follow a (started) client: listen to its notifications and fill the views. */
  async attach(client: StoreClient, reopen?: string): Promise<void> {
    this.detach();
    this.client = client;
    this.server = 'running';
    this.serverError = undefined;
    this.subscriptions = [
      client.onDidChange((p) => this.handleDidChange(p)),
      client.onDidCreate(() => this.scheduleList()),
      client.onDidDelete((p) => this.handleDidDelete(p.session)),
      client.onContextUsage((p) => this.handleUsage(p)),
      client.onCompactionStatus((p) => this.handleCompaction(p)),
    ];
    this.statusEmitter.fire();
    await this.refreshSessions();
    if (reopen) {
      try {
        await this.open(reopen);
      } catch (error) {
        this.errorEmitter.fire(error as Error);
      }
    }
  }

  /** Forget the client and everything it told us: the views empty at once. */
  detach(state: ServerState = 'stopped', error?: string): void {
    for (const s of this.subscriptions) {
      s.dispose();
    }
    this.subscriptions = [];
    this.client = undefined;
    this.clearTimers();
    this.sessions = [];
    this.sessionsLoaded = false;
    this.changed.clear();
    this.current = undefined;
    this.ledger = [];
    this.ledgerEntries.clear();
    this.fullRows = undefined;
    this.treeGeneration++;
    this.server = state;
    this.serverError = error;
    this.sessionsEmitter.fire();
    this.treeEmitter.fire();
    this.ledgerEmitter.fire();
    this.statusEmitter.fire();
  }

  dispose(): void {
    this.detach();
    for (const e of [
      this.sessionsEmitter,
      this.treeEmitter,
      this.ledgerEmitter,
      this.statusEmitter,
      this.errorEmitter,
      this.compactionEmitter,
    ]) {
      e.dispose();
    }
  }

  private clearTimers(): void {
    clearTimeout(this.treeTimer);
    clearTimeout(this.listTimer);
    clearTimeout(this.liveTimer);
    this.treeTimer = this.listTimer = this.liveTimer = undefined;
  }

  private need(): StoreClient {
    if (!this.client) {
      throw new Error('the ctxd server is not running');
    }
    return this.client;
  }

  // --- sessions ---------------------------------------------------------------------------------

  async refreshSessions(): Promise<void> {
    const client = this.need();
    const result = await client.listSessions(this.opts.roots?.length ? { roots: this.opts.roots } : {});
    // session/list names files under the root as configured; session/open and every notification
    // use the real path. Under a symlinked root they differ: key everything by the real path.
    await Promise.all(
      result.sessions.map(async (s) => {
        s.path = await realpath(s.path).catch(() => s.path);
      }),
    );
    if (client !== this.client) {
      return;
    }
    this.sessions = result.sessions;
    this.sessionsLoaded = true;
    this.sessionsEmitter.fire();
  }

  private scheduleList(): void {
    if (this.listTimer) {
      return;
    }
    this.listTimer = setTimeout(() => {
      this.listTimer = undefined;
      if (this.client) {
        this.refreshSessions().catch((e: Error) => this.errorEmitter.fire(e));
      }
    }, 300);
  }

  private markLive(path: string): void {
    this.changed.set(path, this.now);
    const summary = this.sessions.find((s) => s.path === path);
    if (!summary) {
      this.scheduleList(); // a session we have not listed yet
    }
    this.sessionsEmitter.fire();
    this.scheduleLiveExpiry();
  }

  /** One timer for the next live marker to go out (a local clock, not a poll of the server). */
  private scheduleLiveExpiry(): void {
    clearTimeout(this.liveTimer);
    const now = this.now;
    let next = Infinity;
    for (const t of this.changed.values()) {
      if (t + LIVE_MS > now) {
        next = Math.min(next, t + LIVE_MS);
      }
    }
    if (next === Infinity) {
      this.liveTimer = undefined;
      return;
    }
    this.liveTimer = setTimeout(() => {
      this.liveTimer = undefined;
      this.sessionsEmitter.fire();
      this.scheduleLiveExpiry();
    }, next - now + 50);
  }

  private handleDidDelete(path: string): void {
    this.sessions = this.sessions.filter((s) => s.path !== path);
    this.changed.delete(path);
    if (this.current?.path === path) {
      this.current = undefined;
      this.ledger = [];
      this.treeEmitter.fire();
      this.ledgerEmitter.fire();
      this.statusEmitter.fire();
      this.errorEmitter.fire(new Error(`the open session was deleted: ${path}`));
    }
    this.sessionsEmitter.fire();
  }

  // --- the open session -------------------------------------------------------------------------

  /** Open a session (a path or id) and load its tree and ledger. */
  async open(session: string): Promise<SessionInfo> {
    const client = this.need();
    const info = await client.openSession(session);
    if (client !== this.client) {
      return info;
    }
    this.current = {
      path: info.path,
      info,
      tree: undefined,
      usage: info.usage,
      compaction: undefined,
      limit: this.opts.pageRows,
    };
    this.ledger = [];
    this.ledgerEntries.clear();
    this.fullRows = undefined;
    this.sessionsEmitter.fire();
    this.statusEmitter.fire();
    this.ledgerEmitter.fire();
    await this.reloadTree();
    return info;
  }

  /** Close the Conversation view's session. */
  close(): void {
    this.current = undefined;
    this.ledger = [];
    this.ledgerEntries.clear();
    this.fullRows = undefined;
    this.treeGeneration++;
    this.treeEmitter.fire();
    this.ledgerEmitter.fire();
    this.statusEmitter.fire();
    this.sessionsEmitter.fire();
  }

  /** Ask for more rows of a paged tree. */
  async loadMore(): Promise<void> {
    if (this.current) {
      this.current.limit += this.opts.pageRows;
      await this.reloadTree();
    }
  }

  /** Fetch the open session's tree (and then the new ledger entries); drops stale answers. */
  async reloadTree(): Promise<void> {
    const client = this.need();
    const current = this.current;
    if (!current) {
      return;
    }
    const generation = ++this.treeGeneration;
    const work = (async () => {
      const tree = await client.tree({
        session: current.path,
        collapse: this.opts.collapse,
        offset: 0,
        limit: current.limit,
      });
      if (generation !== this.treeGeneration || this.current !== current) {
        return;
      }
      const summary = this.sessions.find((s) => s.path === current.path);
      // An opencode session is named in its database, not by an entry: keep the listing's name.
      const name = tree.name ?? summary?.name ?? null;
      current.tree = tree;
      current.info = { ...current.info, name, entries: tree.entries, leafId: tree.leafId };
      if (tree.usage) {
        current.usage = tree.usage;
      }
      this.fullRows = undefined;
      if (summary && (summary.name !== name || summary.entries !== tree.entries)) {
        summary.name = name;
        summary.entries = tree.entries;
        this.sessionsEmitter.fire();
      }
      this.treeEmitter.fire();
      this.statusEmitter.fire();
      await this.reloadLedger(client, current, tree.rows);
    })();
    this.treeLoading = work;
    try {
      await work;
    } finally {
      if (this.treeLoading === work) {
        this.treeLoading = undefined;
      }
    }
  }

  /** Resolves when no tree request is in flight (tests and the e2e wait on it). */
  async settled(): Promise<void> {
    while (this.treeTimer || this.treeLoading) {
      if (this.treeLoading) {
        await this.treeLoading.catch(() => undefined);
      } else {
        await new Promise((r) => setTimeout(r, this.opts.debounceMs + 5));
      }
    }
  }

  /**
   * The ledger: from session/ledger when the daemon offers it, else from the tree's compaction
   * rows and one session/entry per compaction not seen yet (entries never change).
   */
  private async reloadLedger(client: StoreClient, current: OpenSessionState, rows: readonly TreeRow[]): Promise<void> {
    if (client.supports(Method.sessionLedger)) {
      const result = await client.ledger(current.path);
      if (this.current === current) {
        this.ledger = result.compactions.map(ledgerRowFromServer);
        this.ledgerEmitter.fire();
      }
      return;
    }
    const ids = compactionIds(rows);
    const missing = ids.filter(({ id }) => !this.ledgerEntries.has(id));
    const fetched = await Promise.all(missing.map(({ id }) => client.entry(current.path, id)));
    if (this.current !== current) {
      return;
    }
    for (const result of fetched) {
      this.ledgerEntries.set(result.entry.id, result.entry);
    }
    this.ledger = buildLedger(ids, this.ledgerEntries);
    this.ledgerEmitter.fire();
  }

  private scheduleTree(): void {
    if (this.treeTimer) {
      return;
    }
    this.treeTimer = setTimeout(() => {
      this.treeTimer = undefined;
      if (this.client && this.current) {
        this.reloadTree().catch((e: Error) => this.errorEmitter.fire(e));
      }
    }, this.opts.debounceMs);
  }

  private handleDidChange(p: DidChange): void {
    const summary = this.sessions.find((s) => s.path === p.session);
    if (summary && p.ids.length && !p.reloaded && this.current?.path !== p.session) {
      summary.entries += p.ids.length;
    }
    if (summary) {
      summary.modified = Math.max(summary.modified, this.now / 1000);
    }
    this.markLive(p.session);
    if (this.current && this.current.path === p.session) {
      if (p.reloaded) {
        this.ledgerEntries.clear();
      }
      this.fullRows = undefined;
      this.scheduleTree();
    }
  }

  private handleUsage(p: ContextUsage): void {
    if (this.current && this.current.path === p.session) {
      this.current.usage = p;
      this.statusEmitter.fire();
    }
  }

  private handleCompaction(p: CompactionStatus): void {
    this.markLive(p.session);
    if (this.current && this.current.path === p.session) {
      this.current.compaction = p;
      this.statusEmitter.fire();
      this.compactionEmitter.fire(p);
    }
  }

  // --- on demand --------------------------------------------------------------------------------

  /** The open session's whole tree, uncollapsed (for expanding runs and previews); cached per change. */
  async allRows(): Promise<TreeRow[]> {
    const client = this.need();
    const current = this.current;
    if (!current) {
      return [];
    }
    if (!this.fullRows) {
      const promise = client.tree({ session: current.path, collapse: 0 }).then((t) => t.rows);
      this.fullRows = promise;
      promise.catch(() => {
        if (this.fullRows === promise) {
          this.fullRows = undefined;
        }
      });
    }
    return this.fullRows;
  }

  /** The entries a collapsed row stands for. */
  async runRows(run: CollapsedRow): Promise<TreeNodeRow[]> {
    const rows = sliceRun(await this.allRows(), run);
    if (!rows) {
      throw new Error('the session changed: refresh to see this part of the tree');
    }
    return rows;
  }

  /** Shown entry rows of the open session (no collapsed rows). */
  shownRows(): TreeNodeRow[] {
    return this.current?.tree ? entryRows(this.current.tree.rows) : [];
  }

  ledgerEntry(id: string): Entry | undefined {
    return this.ledgerEntries.get(id);
  }
}
