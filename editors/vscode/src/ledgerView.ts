/** The Compactions view: the ledger of the open session (projection/ledger.ts), newest first. */

import * as vscode from 'vscode';
import { Command } from './constants';
import { presentLedger, type LedgerNode } from './projection/ledger';
import type { Store } from './state';

export class LedgerProvider implements vscode.TreeDataProvider<LedgerNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<LedgerNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly store: Store) {
    this.subscription = store.onDidChangeLedger(() => this.emitter.fire(undefined));
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }

  getTreeItem(node: LedgerNode): vscode.TreeItem {
    const p = presentLedger(node, this.store.now);
    const item = new vscode.TreeItem(p.label, vscode.TreeItemCollapsibleState.None);
    item.id = node.key;
    item.description = p.description;
    item.tooltip = p.tooltip;
    item.iconPath = new vscode.ThemeIcon(p.icon, p.iconColor ? new vscode.ThemeColor(p.iconColor) : undefined);
    item.contextValue = node.kind;
    if (node.kind === 'compaction') {
      item.command = { command: Command.showSummary, title: 'Show Summary', arguments: [node] };
    }
    return item;
  }

  getChildren(node?: LedgerNode): LedgerNode[] {
    if (node) {
      return [];
    }
    if (this.store.current?.tree && this.store.ledger.length === 0) {
      return [{ kind: 'notice', key: 'notice:none', message: 'No compactions in this session yet' }];
    }
    return this.store.ledger;
  }
}
