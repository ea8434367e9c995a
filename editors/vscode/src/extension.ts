/** Wiring only: create the pieces, register them, dispose them. */

import * as vscode from 'vscode';
import { Commands } from './commands';
import { CompositionFeed } from './compositionFeed';
import { ContextViewProvider } from './contextView';
import { Config, DOC_SCHEME, OUTPUT_CHANNEL, View } from './constants';
import { Documents } from './documents';
import { LedgerProvider } from './ledgerView';
import { ServerManager } from './server';
import { ConversationProvider, NodeDecorations } from './sessionTree';
import { SessionsProvider } from './sessionsView';
import { Store } from './state';
import { StatusBar } from './statusBar';

let manager: ServerManager | undefined;

export interface CtxdApi {
  store: Store;
  statusText: () => string;
}

export function activate(context: vscode.ExtensionContext): CtxdApi {
  const config = vscode.workspace.getConfiguration(Config.section);
  const version = String(context.extension.packageJSON.version ?? '0');
  const output = vscode.window.createOutputChannel(OUTPUT_CHANNEL);
  const store = new Store({ collapse: config.get<number>(Config.collapse, 8) });
  manager = new ServerManager(store, output, version);
  const server = manager;
  const documents = new Documents(store, () => server.client);
  const conversation = new ConversationProvider(store);
  const conversationView = vscode.window.createTreeView(View.conversation, { treeDataProvider: conversation, showCollapseAll: true });
  const sessions = new SessionsProvider(store);
  const sessionsView = vscode.window.createTreeView(View.sessions, { treeDataProvider: sessions });
  const ledger = new LedgerProvider(store);
  const ledgerView = vscode.window.createTreeView(View.compactions, { treeDataProvider: ledger });
  const statusBar = new StatusBar(store);
  const feed = new CompositionFeed(store, () => server.client);
  const contextView = new ContextViewProvider(context.extensionUri, feed, output);
  const commands = new Commands({
    store,
    client: () => server.client,
    documents,
    conversation,
    conversationView,
    output,
    restart: () => server.restart(),
    start: () => server.start(),
  });

  const follow = store.onDidChangeTree(() => {
    const leaf = conversation.leaf;
    const followLeaf = vscode.workspace.getConfiguration(Config.section).get<boolean>(Config.followLeaf, true);
    const current = store.current;
    conversationView.description = current
      ? `${current.info.name ?? current.info.sessionId}${current.tree?.readOnly ? ' · read-only' : ''}`
      : undefined;
    if (leaf && followLeaf && conversationView.visible) {
      conversationView.reveal(leaf, { select: false, focus: false, expand: false }).then(undefined, () => undefined);
    }
  });
  const errors = store.onError((e) => {
    output.appendLine(`[client] ${e.message}`);
    void vscode.window.showErrorMessage(`ctxd: ${e.message}`);
  });

  context.subscriptions.push(
    output,
    store,
    server,
    documents,
    conversation,
    conversationView,
    sessions,
    sessionsView,
    ledger,
    ledgerView,
    statusBar,
    commands,
    follow,
    errors,
    vscode.workspace.registerTextDocumentContentProvider(DOC_SCHEME, documents),
    vscode.window.registerFileDecorationProvider(new NodeDecorations()),
    feed,
    contextView,
    vscode.window.registerWebviewViewProvider(View.context, contextView),
  );
  void server.start();
  return { store, statusText: () => statusBar.text };
}

export async function deactivate(): Promise<void> {
  const m = manager;
  manager = undefined;
  await m?.stop();
}
