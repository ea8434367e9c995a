/**
 * The Context view: a webview that draws the open session's composition (webview/context.ts with
 * Chart.js, bundled to dist/webview.js). This side only projects the feed's composition
 * (projection/composition.ts), posts it, and turns the webview's clicks into commands. The page
 * loads nothing remote: its one script carries a nonce, styles come from its own stylesheet, and
 * colours from the theme's CSS variables.
 */

import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { Command } from './constants';
import type { CompositionFeed } from './compositionFeed';
import { projectComposition } from './projection/composition';

/** What the webview sends. */
type FromWebview = { type: 'ready' } | { type: 'reveal'; entryId: string } | { type: 'csp'; detail: string };

export class ContextViewProvider implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly feed: CompositionFeed,
    private readonly output: vscode.OutputChannel,
  ) {
    this.subscription = { dispose: feed.onDidChange(() => this.post()).dispose };
  }

  dispose(): void {
    this.subscription.dispose();
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [dist] };
    view.webview.html = page(view.webview, dist);
    view.webview.onDidReceiveMessage((m: FromWebview) => this.receive(m));
    view.onDidChangeVisibility(() => view.visible && this.post());
    view.onDidDispose(() => {
      this.view = undefined;
    });
    void this.feed.sync();
  }

  private receive(m: FromWebview): void {
    if (m.type === 'ready') {
      this.post();
    } else if (m.type === 'reveal' && typeof m.entryId === 'string') {
      void vscode.commands.executeCommand(Command.revealEntry, m.entryId);
    } else if (m.type === 'csp') {
      this.output.appendLine(`[context view] content security policy violation: ${m.detail}`);
    }
  }

  private post(): void {
    const c = this.feed.latest;
    void this.view?.webview.postMessage({ type: 'composition', model: c ? projectComposition(c) : null });
  }
}

function page(webview: vscode.Webview, dist: vscode.Uri): string {
  const nonce = randomBytes(16).toString('base64');
  const script = webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js'));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.css'));
  const csp = [
    "default-src 'none'",
    `style-src ${webview.cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `img-src ${webview.cspSource} data:`,
    `font-src ${webview.cspSource}`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Context</title>
</head>
<body>
<div id="empty" class="empty">Open a session to see what fills its context.</div>
<main id="main" hidden>
  <p id="headline" class="headline"></p>
  <section id="window"><h2>Window</h2><div class="bar"><canvas id="bar" aria-label="the context window by part"></canvas></div></section>
  <section id="timeline-section"><h2>Timeline <span id="timeline-summary" class="muted"></span></h2><div class="line"><canvas id="timeline" aria-label="context tokens per turn"></canvas></div></section>
  <section id="top-section"><h2>Heaviest entries</h2><ol id="top" class="top"></ol></section>
</main>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}
