/**
 * Every command: what it asks the person, which daemon method it calls, what it shows. Errors
 * reach the person as readable messages ("ctxd: compaction failed: nothing to compact: …").
 */

import * as vscode from 'vscode';
import { CancellationTokenSource, type CtxdClient } from '@ctxd/client';
import { Command, ContextKey, View } from './constants';
import { Documents } from './documents';
import type { ConversationNode } from './projection/conversation';
import { roleName } from './projection/conversation';
import { formatAge, formatDuration, formatInt, formatTokens, tildify } from './projection/format';
import type { LedgerNode } from './projection/ledger';
import { sessionName, type SessionsNode } from './projection/sessions';
import type { TreeNodeRow } from '@ctxd/client';
import type { ConversationProvider } from './sessionTree';
import type { Store } from './state';
import * as os from 'node:os';

export interface CommandDeps {
  store: Store;
  client: () => CtxdClient | undefined;
  documents: Documents;
  conversation: ConversationProvider;
  conversationView: vscode.TreeView<ConversationNode>;
  output: vscode.OutputChannel;
  restart: () => Promise<void>;
  start: () => Promise<void>;
}

type EntryArg = ConversationNode | LedgerNode | { entryId: string } | string | undefined;

export class Commands implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly deps: CommandDeps) {
    const register = (id: string, fn: (...args: any[]) => unknown) => {
      this.disposables.push(vscode.commands.registerCommand(id, (...args: unknown[]) => this.guard(id, () => fn.apply(this, args))));
    };
    register(Command.openSession, this.openSession);
    register(Command.refresh, this.refresh);
    register(Command.compactNow, this.compactNow);
    register(Command.previewCompaction, this.previewCompaction);
    register(Command.branchHere, (arg?: EntryArg) => this.branchHere(arg, undefined));
    register(Command.branchHereWithSummary, (arg?: EntryArg) => this.branchHere(arg, true));
    register(Command.forkSession, this.forkSession);
    register(Command.labelEntry, this.labelEntry);
    register(Command.pinEntry, (arg?: EntryArg) => this.pinEntry(arg, true));
    register(Command.unpinEntry, (arg?: EntryArg) => this.pinEntry(arg, false));
    register(Command.copyEntryId, this.copyEntryId);
    register(Command.showEntry, this.showEntry);
    register(Command.showContext, this.showContext);
    register(Command.showSummary, this.showSummary);
    register(Command.showActions, this.showActions);
    register(Command.restartServer, () => this.deps.restart());
    register(Command.showLog, () => this.deps.output.show(true));
    register(Command.loadMore, () => this.deps.store.loadMore());
    register(Command.revealLeaf, this.revealLeaf);
    register(Command.revealEntry, this.revealEntry);
    register(Command.showComposition, () => vscode.commands.executeCommand(`${View.context}.focus`));
    register(Command.closeSession, () => this.deps.store.close());
    this.disposables.push(
      this.deps.store.onDidChangeStatus(() => {
        const current = this.deps.store.current;
        void vscode.commands.executeCommand('setContext', ContextKey.sessionOpen, current !== undefined);
        void vscode.commands.executeCommand('setContext', ContextKey.compacting, current?.compaction?.state === 'running');
      }),
    );
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }

  /** Run a command; any failure becomes one readable error message. */
  private async guard(id: string, fn: () => unknown): Promise<unknown> {
    try {
      return await fn();
    } catch (error) {
      const message = (error as Error).message ?? String(error);
      this.deps.output.appendLine(`[client] ${id} failed: ${message}`);
      if ((error as { cancelled?: boolean }).cancelled) {
        void vscode.window.showInformationMessage(`ctxd: cancelled`);
        return undefined;
      }
      void vscode.window.showErrorMessage(`ctxd: ${message}`);
      return undefined;
    }
  }

  private async client(): Promise<CtxdClient> {
    if (!this.deps.client()) {
      await this.deps.start();
    }
    const client = this.deps.client();
    if (!client) {
      throw new Error('the ctxd server is not running (see the ctxd output channel)');
    }
    return client;
  }

  /** The open session, or ask which one to open. */
  private async session(): Promise<string> {
    await this.client();
    if (!this.deps.store.current) {
      await this.openSession();
    }
    const current = this.deps.store.current;
    if (!current) {
      throw new Error('no session is open');
    }
    return current.path;
  }

  private title(): string {
    const current = this.deps.store.current;
    return current?.info.name ?? current?.info.sessionId ?? 'session';
  }

  /** The entry a command acts on: its argument, else the Conversation view's selection, else a pick. */
  private async entryId(arg: EntryArg, placeHolder: string): Promise<string | undefined> {
    if (typeof arg === 'string') {
      return arg;
    }
    if (arg && 'kind' in arg) {
      if (arg.kind === 'entry') {
        return arg.row.id;
      }
      if (arg.kind === 'compaction') {
        return arg.entryId;
      }
    } else if (arg && 'entryId' in arg) {
      return arg.entryId;
    }
    const selected = this.deps.conversationView.selection.find((n) => n.kind === 'entry');
    if (selected && selected.kind === 'entry') {
      return selected.row.id;
    }
    await this.session();
    return this.pickEntry(placeHolder);
  }

  private async pickEntry(placeHolder: string): Promise<string | undefined> {
    const rows = this.deps.store.shownRows();
    const ordered = [...rows.filter((r) => r.onActivePath).reverse(), ...rows.filter((r) => !r.onActivePath)];
    const items = ordered.map((r: TreeNodeRow) => ({
      label: `$(${r.isLeaf ? 'arrow-left' : 'circle-small'}) ${r.preview || roleName(r.role)}`,
      description: `${roleName(r.role)} · ${formatTokens(r.tokens)} tok${r.labels.length ? ` · #${r.labels.join(' #')}` : ''}`,
      detail: `${r.id}${r.onActivePath ? '' : ' · off the active path'}`,
      id: r.id,
    }));
    const pick = await vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true, matchOnDetail: true });
    return pick?.id;
  }

  // --- sessions ---------------------------------------------------------------------------------

  async openSession(arg?: SessionsNode | string): Promise<void> {
    await this.client();
    let path: string | undefined;
    if (typeof arg === 'string') {
      path = arg;
    } else if (arg?.kind === 'session') {
      path = arg.summary.path;
    } else {
      if (!this.deps.store.sessionsLoaded) {
        await this.deps.store.refreshSessions();
      }
      const now = Date.now();
      const items = [...this.deps.store.sessions]
        .sort((a, b) => b.modified - a.modified)
        .map((s) => ({
          label: sessionName(s),
          description: `${tildify(s.cwd, os.homedir())} · ${formatAge(s.modified * 1000, now)} · ${formatInt(s.entries)} entries`,
          detail: s.path,
          path: s.path,
        }));
      if (!items.length) {
        throw new Error('no sessions under the session roots (see the ctxd.sessionRoots setting)');
      }
      const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Open a session', matchOnDescription: true, matchOnDetail: true });
      path = pick?.path;
    }
    if (!path) {
      return;
    }
    await this.deps.store.open(path);
    await vscode.commands.executeCommand(`${View.conversation}.focus`);
  }

  async refresh(): Promise<void> {
    await this.client();
    await this.deps.store.refreshSessions();
    if (this.deps.store.current) {
      await this.deps.store.reloadTree();
    }
  }

  async revealLeaf(): Promise<void> {
    const leaf = this.deps.conversation.leaf;
    if (leaf) {
      await this.deps.conversationView.reveal(leaf, { select: true, focus: true, expand: true });
    }
  }

  /** Select an entry in the Conversation view (the Context view's heaviest entries), expanding the
   * collapsed run that holds it; an entry the tree does not show opens as a document instead. */
  async revealEntry(entryId?: string): Promise<void> {
    const node = entryId ? await this.deps.conversation.find(entryId) : undefined;
    if (node) {
      await this.deps.conversationView.reveal(node, { select: true, focus: true, expand: true });
    } else if (entryId) {
      await this.showEntry(entryId);
    }
  }

  // --- compaction -------------------------------------------------------------------------------

  async compactNow(): Promise<void> {
    const session = await this.session();
    const client = await this.client();
    const instructions = await vscode.window.showInputBox({
      title: 'ctxd: Compact Now',
      prompt: 'Instructions for the summary (optional). Enter to compact, Escape to cancel.',
      placeHolder: 'e.g. keep every decision about the public API',
      ignoreFocusOut: true,
    });
    if (instructions === undefined) {
      return;
    }
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'ctxd: compacting', cancellable: true },
      async (progress, token) => {
        const cts = new CancellationTokenSource();
        const sub = token.onCancellationRequested(() => cts.cancel());
        let last = 0;
        try {
          return await client.compact(
            session,
            { instructions: instructions.trim() || null },
            (value) => {
              const pct = typeof value.percentage === 'number' ? value.percentage : undefined;
              progress.report({ message: value.message, increment: pct !== undefined ? Math.max(0, pct - last) : undefined });
              if (pct !== undefined) {
                last = Math.max(last, pct);
              }
            },
            cts.token,
          );
        } finally {
          sub.dispose();
          cts.dispose();
        }
      },
    );
    if (result.forkedFrom && result.session && result.session !== session) {
      // A read-only transcript: ctxd compacted a pi fork of it; show the fork.
      await this.deps.store.refreshSessions();
      await this.deps.store.open(result.session);
      void vscode.window.showInformationMessage(`ctxd: the transcript is read-only, so a pi fork of it was compacted: ${result.session}`);
    }
    await this.deps.store.settled();
    const how = [result.model ?? result.path, formatDuration(result.durationMs)].filter(Boolean).join(', ');
    const choice = await vscode.window.showInformationMessage(
      `ctxd: compacted ${formatTokens(result.tokensBefore)} → ${formatTokens(result.tokensAfter)} tokens (${how})`,
      'Open Summary',
    );
    if (choice === 'Open Summary') {
      await this.showSummary({ entryId: result.entryId });
    }
  }

  async previewCompaction(): Promise<void> {
    const session = await this.session();
    await this.deps.documents.show(Documents.uri('preview', session, this.title()));
  }

  async showSummary(arg?: LedgerNode | { entryId: string }): Promise<void> {
    const session = await this.session();
    let id = arg && 'entryId' in arg ? arg.entryId : undefined;
    if (!id) {
      const rows = this.deps.store.ledger;
      if (!rows.length) {
        throw new Error('this session has no compactions yet');
      }
      const pick = await vscode.window.showQuickPick(
        rows.map((r) => ({ label: `${r.timestamp ?? '?'} · ${r.trigger}`, description: `${formatTokens(r.tokensBefore)} → ${formatTokens(r.tokensAfter)}`, id: r.entryId })),
        { placeHolder: 'Which compaction?' },
      );
      id = pick?.id;
    }
    if (id) {
      await this.deps.documents.show(Documents.uri('summary', session, this.title(), id));
    }
  }

  // --- entries ----------------------------------------------------------------------------------

  async branchHere(arg: EntryArg, summarize: boolean | undefined): Promise<void> {
    const session = await this.session();
    const client = await this.client();
    const entryId = await this.entryId(arg, 'Branch from which entry?');
    if (!entryId) {
      return;
    }
    let withSummary = summarize;
    if (withSummary === undefined) {
      const pick = await vscode.window.showQuickPick(
        [
          { label: 'Branch without a summary', description: 'move the leaf here; the old branch stays in the tree', summarize: false },
          { label: 'Branch with a summary', description: 'also summarise the branch being left, into the new branch', summarize: true },
        ],
        { placeHolder: `Branch at ${entryId}` },
      );
      if (!pick) {
        return;
      }
      withSummary = pick.summarize;
    }
    let instructions: string | undefined;
    if (withSummary) {
      instructions = await vscode.window.showInputBox({
        title: 'ctxd: Branch Here with Summary',
        prompt: 'Instructions for the branch summary (optional)',
        ignoreFocusOut: true,
      });
      if (instructions === undefined) {
        return;
      }
    }
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: withSummary ? 'ctxd: branching with a summary' : 'ctxd: branching' },
      () => client.branch({ session, entryId, summarize: withSummary ?? false, instructions: instructions?.trim() || null }),
    );
    await this.deps.store.settled();
    const summary = result.summaryEntryId ? ` A summary of the ${result.summarizedEntries} entries left behind opens the new branch.` : '';
    void vscode.window.showInformationMessage(`ctxd: branched at ${entryId}: new entries continue from there.${summary}`);
  }

  async forkSession(arg?: EntryArg): Promise<void> {
    const session = await this.session();
    const client = await this.client();
    const entryId = (await this.entryId(arg, 'Fork the session at which entry?')) ?? undefined;
    if (!entryId) {
      return;
    }
    const result = await client.fork(session, entryId);
    await this.deps.store.refreshSessions();
    await this.deps.store.open(result.path);
    void vscode.window.showInformationMessage(`ctxd: forked at ${entryId} into ${result.path}`);
  }

  async labelEntry(arg?: EntryArg): Promise<void> {
    const session = await this.session();
    const client = await this.client();
    const entryId = await this.entryId(arg, 'Label which entry?');
    if (!entryId) {
      return;
    }
    const row = this.deps.store.shownRows().find((r) => r.id === entryId);
    const label = await vscode.window.showInputBox({
      title: `ctxd: Label ${entryId}`,
      prompt: 'A label for this entry (empty clears it)',
      value: row?.labels[0] ?? '',
      ignoreFocusOut: true,
    });
    if (label === undefined) {
      return;
    }
    await client.label(session, entryId, label.trim() || null);
    await this.deps.store.settled();
  }

  /** Pin or unpin a message: compactions carry a pinned one verbatim after their summary. */
  async pinEntry(arg: EntryArg | undefined, pinned: boolean): Promise<void> {
    const session = await this.session();
    const client = await this.client();
    const entryId = await this.entryId(arg, pinned ? 'Pin which message?' : 'Unpin which message?');
    if (!entryId) {
      return;
    }
    await client.pin(session, entryId, pinned);
    await this.deps.store.settled();
    vscode.window.setStatusBarMessage(`ctxd: ${pinned ? 'pinned' : 'unpinned'} ${entryId}`, 3000);
  }

  async copyEntryId(arg?: EntryArg): Promise<void> {
    const entryId = await this.entryId(arg, 'Copy the id of which entry?');
    if (!entryId) {
      return;
    }
    await vscode.env.clipboard.writeText(entryId);
    vscode.window.setStatusBarMessage(`ctxd: copied ${entryId}`, 3000);
  }

  async showEntry(arg?: EntryArg): Promise<void> {
    const session = await this.session();
    const entryId = await this.entryId(arg, 'Show which entry?');
    if (!entryId) {
      return;
    }
    await this.deps.documents.show(Documents.uri('entry', session, this.title(), entryId));
  }

  async showContext(): Promise<void> {
    const session = await this.session();
    await this.deps.documents.show(Documents.uri('context', session, this.title()));
  }

  // --- the status bar's menu --------------------------------------------------------------------

  async showActions(): Promise<void> {
    const running = this.deps.client() !== undefined;
    const open = this.deps.store.current !== undefined;
    const items: (vscode.QuickPickItem & { command: string })[] = [];
    if (running) {
      if (open) {
        const usage = this.deps.store.current?.usage;
        items.push(
          { label: '$(fold) Compact Now…', description: usage ? `${formatTokens(usage.tokens)} tokens now` : '', command: Command.compactNow },
          { label: '$(eye) Preview Compaction', description: 'a dry run: what would be summarised', command: Command.previewCompaction },
          { label: '$(book) Show Context', description: 'the next request, with token counts', command: Command.showContext },
          { label: '$(git-branch) Branch Here…', description: 'move the leaf to an earlier entry', command: Command.branchHere },
          { label: '$(arrow-left) Reveal Leaf', command: Command.revealLeaf },
        );
      }
      items.push(
        { label: '$(folder-opened) Open Session…', command: Command.openSession },
        { label: '$(refresh) Refresh', command: Command.refresh },
      );
    }
    items.push(
      { label: '$(debug-restart) Restart Server', command: Command.restartServer },
      { label: '$(output) Show Log', command: Command.showLog },
    );
    const pick = await vscode.window.showQuickPick(items, { placeHolder: 'ctxd' });
    if (pick) {
      await vscode.commands.executeCommand(pick.command);
    }
  }
}
