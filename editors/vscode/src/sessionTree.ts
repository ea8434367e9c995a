/**
 * The Conversation view: a thin adapter from the store's tree rows (projected by
 * projection/conversation.ts) to VS Code TreeItems, plus the decorations that colour the active
 * path and badge the leaf, compactions and branch summaries.
 */

import * as vscode from 'vscode';
import { NODE_SCHEME } from './constants';
import {
  childrenOf,
  expandChunk,
  expandRun,
  present,
  project,
  type ConversationNode,
  type Projection,
} from './projection/conversation';
import type { Store } from './state';

const EMPTY: Projection = { roots: [], byKey: new Map(), leafKey: undefined };

const STATE = {
  none: vscode.TreeItemCollapsibleState.None,
  collapsed: vscode.TreeItemCollapsibleState.Collapsed,
  expanded: vscode.TreeItemCollapsibleState.Expanded,
} as const;

export class ConversationProvider implements vscode.TreeDataProvider<ConversationNode>, vscode.Disposable {
  private projection: Projection = EMPTY;
  /** Nodes created by expanding collapsed runs and chunks, by key (for getParent). */
  private expanded = new Map<string, ConversationNode>();
  private readonly emitter = new vscode.EventEmitter<ConversationNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly store: Store) {
    this.subscription = store.onDidChangeTree(() => this.update());
    this.update();
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }

  private update(): void {
    const tree = this.store.current?.tree;
    this.projection = tree ? project(tree.rows, tree.total) : EMPTY;
    this.expanded.clear();
    this.emitter.fire(undefined);
  }

  get leaf(): ConversationNode | undefined {
    const key = this.projection.leafKey;
    return key ? this.projection.byKey.get(key) : undefined;
  }

  node(key: string): ConversationNode | undefined {
    return this.projection.byKey.get(key) ?? this.expanded.get(key);
  }

  /** The node of an entry, expanding the collapsed runs (and their chunks) that may hold it. */
  async find(entryId: string): Promise<ConversationNode | undefined> {
    const queue: ConversationNode[] = [...this.projection.byKey.values()].filter((n) => n.kind === 'collapsed');
    for (let found = this.node(entryId); !found; found = this.node(entryId)) {
      const next = queue.shift();
      if (!next) {
        return undefined;
      }
      const children = await this.getChildren(next);
      queue.push(...children.filter((n) => n.kind === 'collapsed' || n.kind === 'chunk'));
    }
    return this.node(entryId);
  }

  getTreeItem(node: ConversationNode): vscode.TreeItem {
    const p = present(node);
    const label: vscode.TreeItemLabel = p.highlight ? { label: p.label, highlights: [[0, p.label.length]] } : { label: p.label };
    const item = new vscode.TreeItem(label, STATE[p.expandable]);
    item.id = node.key;
    item.description = p.description;
    item.tooltip = p.tooltip;
    item.iconPath = new vscode.ThemeIcon(p.icon, p.iconColor ? new vscode.ThemeColor(p.iconColor) : undefined);
    // "entry.pinned" lets the context menu offer Unpin instead of Pin.
    item.contextValue = node.kind === 'entry' && node.row.pinned ? 'entry.pinned' : node.kind;
    const session = this.store.current?.path ?? '';
    item.resourceUri = nodeUri(session, node.key, p.active, p.badge);
    if (node.kind === 'entry') {
      item.command = { command: 'ctxd.showEntry', title: 'Show Entry', arguments: [node] };
    } else if (node.kind === 'more') {
      item.command = { command: 'ctxd.loadMore', title: 'Load More' };
    }
    return item;
  }

  async getChildren(node?: ConversationNode): Promise<ConversationNode[]> {
    if (!node) {
      return this.projection.roots;
    }
    let children: ConversationNode[];
    if (node.kind === 'collapsed') {
      try {
        children = expandRun(node, await this.store.runRows(node.row));
      } catch (error) {
        children = [{ kind: 'notice', key: `notice:${node.key}`, message: (error as Error).message, parentKey: node.key }];
      }
    } else if (node.kind === 'chunk') {
      children = expandChunk(node);
    } else {
      return childrenOf(node);
    }
    for (const child of children) {
      this.expanded.set(child.key, child);
    }
    return children;
  }

  getParent(node: ConversationNode): ConversationNode | undefined {
    return node.parentKey ? this.node(node.parentKey) : undefined;
  }
}

/** A node's decoration is encoded in its resource URI, so the provider needs no state. */
export function nodeUri(session: string, key: string, active: boolean, badge: string | undefined): vscode.Uri {
  const query = new URLSearchParams({ a: active ? '1' : '0', ...(badge ? { b: badge } : {}) }).toString();
  return vscode.Uri.from({ scheme: NODE_SCHEME, path: `/${encodeURIComponent(session)}/${encodeURIComponent(key)}`, query });
}

export class NodeDecorations implements vscode.FileDecorationProvider {
  provideFileDecoration(uri: vscode.Uri): vscode.FileDecoration | undefined {
    if (uri.scheme !== NODE_SCHEME) {
      return undefined;
    }
    const query = new URLSearchParams(uri.query);
    const active = query.get('a') === '1';
    const badge = query.get('b') ?? undefined;
    if (!active && !badge) {
      return undefined;
    }
    const decoration = new vscode.FileDecoration(
      badge,
      active ? 'on the active path' : undefined,
      active ? new vscode.ThemeColor('ctxd.activePathForeground') : undefined,
    );
    decoration.propagate = false;
    return decoration;
  }
}
