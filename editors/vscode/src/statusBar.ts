/** The status bar item: context usage of the open session, a spinner while compacting. */

import * as vscode from 'vscode';
import { Command } from './constants';
import { presentStatus } from './projection/status';
import type { Store } from './state';

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly store: Store) {
    this.item = vscode.window.createStatusBarItem('ctxd.usage', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'ctxd context usage';
    this.item.command = Command.showActions;
    this.subscription = store.onDidChangeStatus(() => this.update());
    this.update();
    this.item.show();
  }

  /** The text shown now (for tests). */
  get text(): string {
    return this.item.text;
  }

  update(): void {
    const current = this.store.current;
    const p = presentStatus({
      server: this.store.server,
      serverError: this.store.serverError,
      sessionName: current ? current.info.name ?? current.info.sessionId : undefined,
      usage: current?.usage,
      compaction: current?.compaction,
    });
    this.item.text = p.text;
    this.item.tooltip = p.tooltip;
    this.item.backgroundColor = p.background ? new vscode.ThemeColor(`statusBarItem.${p.background}Background`) : undefined;
  }

  dispose(): void {
    this.subscription.dispose();
    this.item.dispose();
  }
}
