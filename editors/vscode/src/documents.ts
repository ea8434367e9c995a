/**
 * Read-only Markdown documents under the `ctxd:` scheme: an entry, the built context, a compaction
 * preview and a compaction summary. The text is rendered on demand from the daemon's answers; the
 * context document follows the session as it changes.
 */

import * as vscode from 'vscode';
import { DOC_SCHEME } from './constants';
import { basename } from './projection/format';
import { ledgerRow } from './projection/ledger';
import { sessionName } from './projection/sessions';
import {
  renderContextDocument,
  renderEntryDocument,
  renderPreviewDocument,
  renderSummaryDocument,
} from './projection/render';
import type { CtxdClient } from '@ctxd/client';
import type { Store } from './state';

export type DocumentKind = 'entry' | 'context' | 'preview' | 'summary';

export class Documents implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;
  private readonly live = new Set<string>();
  /** Text rendered by a command just before opening its document. */
  private readonly snapshots = new Map<string, string>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly store: Store,
    private readonly client: () => CtxdClient | undefined,
  ) {
    this.subscriptions = [
      store.onDidChangeTree(() => {
        // The context document follows its session; entries and summaries do not change.
        const open = store.current?.path;
        for (const text of this.live) {
          const uri = vscode.Uri.parse(text);
          if (uri.path.startsWith('/context/') && open && new URLSearchParams(uri.query).get('session') === open) {
            this.snapshots.delete(text);
            this.emitter.fire(uri);
          }
        }
      }),
      vscode.workspace.onDidCloseTextDocument((doc) => {
        this.live.delete(doc.uri.toString());
        this.snapshots.delete(doc.uri.toString());
      }),
    ];
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    this.emitter.dispose();
  }

  static uri(kind: DocumentKind, session: string, title: string, id?: string): vscode.Uri {
    const safe = title.replace(/[\\/?#%*:|"<>]+/g, '-').slice(0, 60) || 'session';
    const name = id ? `${safe} ${kind} ${id}.md` : `${safe} ${kind}.md`;
    const query = new URLSearchParams({ session, ...(id ? { id } : {}) }).toString();
    return vscode.Uri.from({ scheme: DOC_SCHEME, path: `/${kind}/${name}`, query });
  }

  /**
   * Render a document's text now (so that a failure reaches the caller as an error, not as a
   * document), then open it, or refresh it if it is open already.
   */
  async show(uri: vscode.Uri, text?: string): Promise<vscode.TextEditor> {
    this.snapshots.set(uri.toString(), text ?? (await this.render(uri)));
    if (this.live.has(uri.toString())) {
      this.emitter.fire(uri);
    }
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.languageId !== 'markdown') {
      await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    }
    return vscode.window.showTextDocument(doc, { preview: false });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    this.live.add(uri.toString());
    const snapshot = this.snapshots.get(uri.toString());
    if (snapshot !== undefined) {
      return snapshot;
    }
    try {
      return await this.render(uri);
    } catch (error) {
      return `# ctxd\n\n**${(error as Error).message}**\n`;
    }
  }

  private sessionTitle(path: string): string {
    if (this.store.current?.path === path && this.store.current.info.name) {
      return this.store.current.info.name;
    }
    const summary = this.store.sessions.find((s) => s.path === path);
    return summary ? sessionName(summary) : basename(path);
  }

  /** The document's text from the daemon's answers now. */
  async render(uri: vscode.Uri): Promise<string> {
    const query = new URLSearchParams(uri.query);
    const session = query.get('session') ?? '';
    const id = query.get('id') ?? '';
    const kind = uri.path.split('/')[1] as DocumentKind;
    const client = this.client();
    if (!client || !client.running) {
      throw new Error('the ctxd server is not running');
    }
    const name = this.sessionTitle(session);
    switch (kind) {
      case 'entry':
        return renderEntryDocument(await client.entry(session, id), name);
      case 'context':
        return renderContextDocument(await client.buildContext({ session, includeMessages: true }), name);
      case 'preview': {
        const plan = await client.previewCompaction(session);
        const rows = this.store.current?.path === session ? await this.store.allRows() : (await client.tree({ session, collapse: 0 })).rows;
        return renderPreviewDocument(plan, name, rows);
      }
      case 'summary': {
        const entry = this.store.ledgerEntry(id) ?? (await client.entry(session, id)).entry;
        const active = this.store.ledger.find((r) => r.entryId === id)?.onActivePath ?? false;
        return renderSummaryDocument(ledgerRow(entry, active), name, Date.now());
      }
      default:
        throw new Error(`unknown document ${uri.toString()}`);
    }
  }
}
