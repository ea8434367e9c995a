/** The Sessions view: a thin adapter from the store's session list (projection/sessions.ts). */

import * as os from 'node:os';
import * as vscode from 'vscode';
import { Command } from './constants';
import { presentSession, projectSessions, type ProjectNode, type SessionsNode } from './projection/sessions';
import type { Store } from './state';

export class SessionsProvider implements vscode.TreeDataProvider<SessionsNode>, vscode.Disposable {
  private projects: ProjectNode[] = [];
  private readonly emitter = new vscode.EventEmitter<SessionsNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly store: Store) {
    this.subscription = store.onDidChangeSessions(() => this.update());
    this.update();
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }

  private update(): void {
    this.projects = projectSessions({
      sessions: this.store.sessions,
      changed: this.store.changed,
      openPath: this.store.current?.path,
      now: this.store.now,
    });
    this.emitter.fire(undefined);
  }

  getTreeItem(node: SessionsNode): vscode.TreeItem {
    const p = presentSession(node, this.store.now, os.homedir());
    const item = new vscode.TreeItem(p.label, vscode.TreeItemCollapsibleState[p.expandable === 'none' ? 'None' : p.expandable === 'expanded' ? 'Expanded' : 'Collapsed']);
    item.id = node.key;
    item.description = p.description;
    item.tooltip = p.tooltip;
    item.iconPath = new vscode.ThemeIcon(p.icon, p.iconColor ? new vscode.ThemeColor(p.iconColor) : undefined);
    item.contextValue = node.kind;
    if (node.kind === 'session') {
      item.command = { command: Command.openSession, title: 'Open Session', arguments: [node] };
    }
    return item;
  }

  getChildren(node?: SessionsNode): SessionsNode[] {
    if (!node) {
      if (this.store.sessionsLoaded && this.projects.length === 0) {
        return [{ kind: 'notice', key: 'notice:none', message: 'No sessions under the session roots yet' }];
      }
      return this.projects;
    }
    return node.kind === 'project' ? node.sessions : node.kind === 'session' ? node.archives : [];
  }

  getParent(node: SessionsNode): SessionsNode | undefined {
    if (node.kind === 'session') {
      for (const project of this.projects) {
        if (project.sessions.includes(node)) {
          return project;
        }
        const owner = project.sessions.find((s) => s.archives.includes(node));
        if (owner) {
          return owner;
        }
      }
    }
    return undefined;
  }
}
