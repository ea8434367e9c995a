/**
 * End to end in real VS Code (code-server, driven by Chromium through playwright-core).
 *
 * It installs the packaged .vsix into a private code-server, opens the ctxd view on a real session
 * written the way an agent writes it, appends to that file from outside and waits for the new node
 * and the new status-bar text, previews a compaction, compacts, opens the ledger row's summary,
 * branches from the tree's context menu and restarts the server. Screenshots go to
 * artifacts/vscode-e2e/ (git ignores artifacts/).
 *
 * Environment (scripts/test.sh sets them):
 *   CODE_SERVER      the code-server launcher (run under Node 24)
 *   NODE24           the Node 24 binary code-server runs on
 *   VSIX             the packaged extension
 *   CTXD_SERVER_COMMAND  how to start ctxd (space-separated)
 *   CHROMIUM         default /usr/bin/chromium
 *   E2E_TIMEOUT_MS   the whole run's bound (default 300000)
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type FrameLocator, type Locator, type Page } from 'playwright-core';
import { writeSampleSession, SessionWriter } from '../test/fixtures';

const HERE = resolve(__dirname, '../..'); // editors/vscode (this file runs from out/e2e)
const REPO = resolve(HERE, '../..');
const ARTIFACTS = process.env.E2E_ARTIFACTS ?? join(REPO, 'artifacts', 'vscode-e2e');
const WORK = join(HERE, '.cache', 'e2e-run');
const TOTAL_MS = Number(process.env.E2E_TIMEOUT_MS ?? 300_000);
const STEP_MS = 60_000;

function need(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`set ${name}`);
  }
  return value;
}

function log(message: string): void {
  process.stdout.write(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => res(port));
    });
  });
}

async function waitForHttp(url: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  let last = '';
  while (Date.now() < end) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (r.ok) {
        return;
      }
      last = `HTTP ${r.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer ${url} within ${ms} ms (${last})`);
}

let codeServer: ChildProcess | undefined;
let context: BrowserContext | undefined;
let page: Page | undefined;
let shot = 0;
const cleanups: (() => void)[] = [];

async function screenshot(name: string): Promise<string | undefined> {
  if (!page) {
    return undefined;
  }
  const file = join(ARTIFACTS, `${String(++shot).padStart(2, '0')}-${name}.png`);
  try {
    await page.mouse.move(1100, 880).catch(() => undefined); // no hover tooltips in the picture
    await page.screenshot({ path: file, timeout: 15_000 });
    log(`screenshot ${file}`);
    return file;
  } catch (error) {
    log(`screenshot failed: ${(error as Error).message}`);
    return undefined;
  }
}

async function step<T>(name: string, fn: () => Promise<T>, ms = STEP_MS): Promise<T> {
  log(`▶ ${name}`);
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const result = await Promise.race([
      fn(),
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`step "${name}" timed out after ${ms} ms`)), ms);
      }),
    ]);
    log(`✔ ${name} (${Date.now() - started} ms)`);
    return result;
  } catch (error) {
    log(`✖ ${name}: ${(error as Error).message}`);
    await screenshot(`FAILED-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Stop code-server: its own pid first, then (it runs in its own process group) what it left. */
async function stopCodeServer(): Promise<void> {
  const child = codeServer;
  codeServer = undefined;
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  const wait = (ms: number) => Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
  child.kill('SIGTERM');
  if (!(await wait(5000))) {
    child.kill('SIGKILL');
    await wait(3000);
  }
  try {
    process.kill(-child.pid, 'SIGKILL'); // the group we created with detached: true
  } catch {
    // already gone
  }
}

async function cleanup(): Promise<void> {
  await context?.close().catch(() => undefined);
  context = undefined;
  await stopCodeServer();
  cleanups.splice(0).forEach((fn) => fn());
}

// --- a fake model on 127.0.0.1 ----------------------------------------------------------------

/**
 * An OpenAI-compatible chat endpoint that answers every request after `delayMs` with a fixed
 * summary: ctxd's litellm summariser talks to it, so a compaction takes long enough to watch.
 */
function fakeModel(delayMs: number): Promise<{ url: string; requests: () => number; close: () => void }> {
  let count = 0;
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      count++;
      setTimeout(() => {
        const content =
          '## Goal\n- Fix the calculator\'s rounding without changing the public API.\n\n' +
          '## Progress\n### Done\n- [x] Step 1 fixed and tested.\n\n## Key Decisions\n- Keep every decision about rounding.';
        const answer = {
          id: `chatcmpl-${count}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: 'fake-summarizer',
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: Math.ceil(body.length / 4), completion_tokens: 60, total_tokens: Math.ceil(body.length / 4) + 60 },
        };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      }, delayMs);
    });
  });
  return new Promise((res) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      res({ url: `http://127.0.0.1:${port}/v1`, requests: () => count, close: () => server.close() });
    });
  });
}

// --- VS Code helpers ----------------------------------------------------------------------------

/** The Context view's page (a webview: an iframe inside an iframe). */
function contextFrame(p: Page): FrameLocator {
  return p.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
}

/** Switch the colour theme through the palette (Preferences: Color Theme). */
async function setTheme(p: Page, theme: string): Promise<void> {
  await runCommand(p, 'Preferences: Color Theme');
  const input = quickInput(p);
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(theme);
  await p.locator('.quick-input-widget .monaco-list-row', { hasText: theme }).first().waitFor({ timeout: 10_000 });
  await p.keyboard.press('Enter');
}

/** Point at the timeline's last compaction marker (its tooltip: tokens before → after, trigger, summariser). */
async function hoverCompaction(p: Page): Promise<void> {
  const view = contextFrame(p);
  const at = await view.locator('body').getAttribute('data-compaction-marker');
  const box = await view.locator('#timeline').boundingBox();
  if (!at || !box) {
    throw new Error(`no compaction marker to hover (${at}, ${JSON.stringify(box)})`);
  }
  const [x, y] = at.split(',').map(Number) as [number, number];
  await p.mouse.move(box.x + x - 3, box.y + y - 3);
  await p.mouse.move(box.x + x, box.y + y, { steps: 3 });
  await p.waitForTimeout(400);
}

/** A picture of the window for the docs (the page, scaled down to keep the file small): into docs/images/ with
 * CTXD_DOCS_PICTURES=1, else beside the screenshots (a test run leaves the checkout as it was). */
async function docsPicture(p: Page, name: string): Promise<void> {
  const dir = process.env.CTXD_DOCS_PICTURES === '1' ? join(REPO, 'docs', 'images') : ARTIFACTS;
  mkdirSync(dir, { recursive: true });
  const panel = await p.locator('.part.panel').boundingBox();
  const sidebar = await p.locator('.part.sidebar').boundingBox();
  if (!panel || !sidebar) {
    throw new Error('no panel or sidebar to picture');
  }
  const x = Math.min(sidebar.x, panel.x);
  const y = Math.min(sidebar.y, panel.y);
  const right = Math.max(sidebar.x + sidebar.width, panel.x + panel.width);
  const bottom = Math.max(sidebar.y + sidebar.height, panel.y + panel.height);
  const clip = { x, y, width: right - x, height: bottom - y };
  await p.screenshot({ path: join(dir, `${name}.png`), clip, timeout: 15_000 });
  log(`docs picture ${join(dir, `${name}.png`)}`);
}


function pane(p: Page, title: string): Locator {
  return p.locator('.pane', { has: p.locator('.pane-header', { hasText: title }) }).first();
}

function row(scope: Locator, text: string | RegExp): Locator {
  return scope.locator('.monaco-list-row', { hasText: text }).first();
}

/** A row of a virtualised tree, scrolling the list until it is rendered. */
async function findRow(p: Page, scope: Locator, text: string | RegExp, ms = 15_000): Promise<Locator> {
  const end = Date.now() + ms;
  let direction = 1;
  let lastTop = -1;
  while (Date.now() < end) {
    const r = row(scope, text);
    if ((await r.count()) && (await r.isVisible())) {
      return r;
    }
    const rows = scope.locator('.monaco-scrollable-element').first();
    const box = await rows.boundingBox();
    if (box) {
      await p.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await p.mouse.wheel(0, 66 * direction);
    }
    await p.waitForTimeout(150);
    const top = await scope.locator('.monaco-list-row').first().getAttribute('data-index').catch(() => null);
    const now = Number(top ?? -1);
    if (now === lastTop) {
      direction = -direction; // reached an end: go the other way
    }
    lastTop = now;
  }
  throw new Error(`no row ${String(text)} in the tree`);
}

async function statusText(p: Page): Promise<string> {
  const item = p.locator('.statusbar-item', { hasText: /ctxd/ }).first();
  return (await item.innerText({ timeout: 5000 })).replace(/\s+/g, ' ').trim();
}

async function waitForStatus(p: Page, expected: RegExp, ms = 30_000): Promise<string> {
  const end = Date.now() + ms;
  let text = '';
  while (Date.now() < end) {
    text = await statusText(p).catch(() => '');
    if (expected.test(text)) {
      return text;
    }
    await p.waitForTimeout(200);
  }
  throw new Error(`status bar: expected ${expected}, saw "${text}"`);
}

/** Drag the sash between the sidebar and the editor to the right, for readable screenshots. */
async function widenSidebar(p: Page): Promise<void> {
  const sidebar = await p.locator('.part.sidebar').boundingBox();
  if (!sidebar) {
    return;
  }
  const x = sidebar.x + sidebar.width;
  const y = sidebar.y + sidebar.height / 2;
  await p.mouse.move(x, y);
  await p.mouse.down();
  await p.mouse.move(x + 300, y, { steps: 10 });
  await p.mouse.up();
}

/** Run a command from the palette by its title. */
async function runCommand(p: Page, title: string): Promise<void> {
  await p.keyboard.press('Escape');
  await p.keyboard.press('F1');
  const input = quickInput(p);
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(`>${title}`);
  const item = p.locator('.quick-input-widget .monaco-list-row', { hasText: title }).first();
  await item.waitFor({ state: 'visible', timeout: 10_000 });
  await item.click();
}

/** Right-click a tree row and choose a context menu item (again if the first click is lost). */
async function contextMenu(p: Page, target: Locator, item: string, beforeClick?: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await target.click({ button: 'right' });
    const entry = p.locator('.monaco-menu .action-item', { hasText: item }).first();
    await entry.waitFor({ state: 'visible', timeout: 10_000 });
    await p.waitForTimeout(250); // the menu fades in
    await beforeClick?.();
    await entry.click();
    try {
      await p.locator('.monaco-menu').first().waitFor({ state: 'hidden', timeout: 3000 });
      return;
    } catch (error) {
      if (attempt >= 3) {
        throw error;
      }
      await p.keyboard.press('Escape');
    }
  }
}

function quickInput(p: Page): Locator {
  return p.locator('.quick-input-widget input').filter({ visible: true }).first();
}

/** Answer the quick input that is open: type `text` (maybe empty) and press Enter. */
async function answerInput(p: Page, text: string): Promise<void> {
  const input = quickInput(p);
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(text);
  await input.press('Enter');
}

async function pickItem(p: Page, text: string | RegExp): Promise<void> {
  const item = p.locator('.quick-input-widget .monaco-list-row', { hasText: text }).first();
  await item.waitFor({ state: 'visible', timeout: 10_000 });
  await item.click();
}

async function editorText(p: Page, contains: string | RegExp, ms = 20_000): Promise<string> {
  const end = Date.now() + ms;
  let text = '';
  while (Date.now() < end) {
    text = (await p.locator('.editor-instance .monaco-editor .view-lines').first().innerText({ timeout: 2000 }).catch(() => '')).replace(/\u00a0/g, ' ');
    if (typeof contains === 'string' ? text.includes(contains) : contains.test(text)) {
      return text;
    }
    await p.waitForTimeout(200);
  }
  throw new Error(`editor: expected ${String(contains)}, saw "${text.slice(0, 300)}"`);
}

async function notification(p: Page, text: string | RegExp, ms = 30_000): Promise<string> {
  const toast = p.locator('.notification-toast', { hasText: text }).first();
  await toast.waitFor({ state: 'visible', timeout: ms });
  return (await toast.innerText()).replace(/\s+/g, ' ').trim();
}

async function noErrorToasts(p: Page): Promise<void> {
  const errors = p.locator('.notification-toast', { hasText: /ctxd:/ }).filter({ has: p.locator('.codicon-error') });
  const n = await errors.count();
  if (n) {
    throw new Error(`error notifications: ${(await errors.allTextContents()).join(' | ')}`);
  }
}

// --- the test -----------------------------------------------------------------------------------

async function main(): Promise<void> {
  const codeServerBin = need('CODE_SERVER');
  const node24 = need('NODE24');
  const vsix = need('VSIX');
  const serverCommand = need('CTXD_SERVER_COMMAND');
  const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

  rmSync(WORK, { recursive: true, force: true });
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  const dirs = {
    userData: join(WORK, 'user-data'),
    extensions: join(WORK, 'extensions'),
    browser: join(WORK, 'chromium-profile'),
    sessions: join(WORK, 'sessions'),
    workspace: join(WORK, 'workspace'),
  };
  Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
  mkdirSync(join(dirs.userData, 'User'), { recursive: true });

  // Sessions as an agent leaves them: one big enough to compact, one in another project.
  const session = writeSampleSession(dirs.sessions, { turns: 8, toolTokens: 3000, start: Date.now() - 600_000 });
  writeSampleSession(dirs.sessions, { cwd: '/home/dev/website', name: 'Redesign the landing page', turns: 2, toolTokens: 200, start: Date.now() - 7_200_000 });
  writeFileSync(join(dirs.workspace, 'README.md'), '# calc\n');
  const model = await fakeModel(4000);
  cleanups.push(model.close);

  const settings = {
    'ctxd.server.command': serverCommand,
    'ctxd.server.env': {
      PYTHONPATH: REPO,
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
      CTXD_CONFIG: join(WORK, 'no-ctxd-config.json'),
      OPENAI_API_KEY: 'sk-fake-e2e',
    },
    'ctxd.model': 'openai/fake-summarizer',
    'ctxd.compaction': { apiBase: model.url, timeoutSeconds: 60 },
    'ctxd.sessionRoots': [dirs.sessions],
    'ctxd.transcriptRoots': [],
    'ctxd.autoCompact': false,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'workbench.colorTheme': 'Default Dark Modern',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'chat.disableAIFeatures': true,
    'chat.commandCenter.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'security.workspace.trust.enabled': false,
    'window.menuBarVisibility': 'compact',
    'git.enabled': false,
    'git.openRepositoryInParentFolders': 'never',
  };
  writeFileSync(join(dirs.userData, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
  // code-server's window is a remote one: machine-scoped settings live in the Machine settings.
  const machine = Object.fromEntries(Object.entries(settings).filter(([k]) => k.startsWith('ctxd.')));
  mkdirSync(join(dirs.userData, 'Machine'), { recursive: true });
  writeFileSync(join(dirs.userData, 'Machine', 'settings.json'), JSON.stringify(machine, null, 2));
  const config = join(WORK, 'code-server.yaml');
  writeFileSync(config, 'auth: none\ncert: false\ndisable-telemetry: true\ndisable-update-check: true\n');

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${resolve(node24, '..')}:${process.env.PATH ?? ''}`,
    // The extension gallery is never needed: point it at a closed loopback port.
    EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: 'http://127.0.0.1:9/gallery', itemUrl: 'http://127.0.0.1:9/item' }),
  };
  for (const key of Object.keys(env)) {
    if (key.startsWith('CTXD_') && key !== 'CTXD_SERVER_COMMAND') {
      delete env[key];
    }
  }
  const common = ['--config', config, '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions];

  await step('install the .vsix into code-server', async () => {
    const r = spawnSync(codeServerBin, [...common, '--install-extension', vsix, '--force'], { env, encoding: 'utf8', timeout: 90_000 });
    log((r.stdout + r.stderr).trim().split('\n').slice(-3).join(' | '));
    if (r.status !== 0) {
      throw new Error(`--install-extension failed (${r.status}): ${r.stderr}`);
    }
    if (!existsSync(join(dirs.extensions, 'ctxd.ctxd-0.1.0'))) {
      throw new Error('the extension is not in the extensions dir');
    }
  }, 100_000);

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await step('start code-server on 127.0.0.1', async () => {
    const out = createWriteStream(join(ARTIFACTS, 'code-server.log'));
    codeServer = spawn(
      codeServerBin,
      [...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', '--ignore-last-opened', dirs.workspace],
      { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    codeServer.stdout!.pipe(out);
    codeServer.stderr!.pipe(out);
    codeServer.once('exit', (code, signal) => log(`code-server exited (${code ?? signal})`));
    await waitForHttp(`${url}/healthz`, 60_000);
  }, 70_000);

  const p = await step('open VS Code in Chromium', async () => {
    context = await chromium.launchPersistentContext(dirs.browser, {
      executablePath: chromiumPath,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
      ],
      viewport: { width: 1500, height: 920 },
      timeout: 60_000,
    });
    const pg = context.pages()[0] ?? (await context.newPage());
    page = pg;
    pg.setDefaultTimeout(20_000);
    pg.on('pageerror', (e) => log(`page error: ${e.message}`));
    await pg.goto(`${url}/?folder=${encodeURIComponent(dirs.workspace)}`, { waitUntil: 'domcontentloaded' });
    await pg.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
    await pg.locator('.statusbar').waitFor({ state: 'visible', timeout: 30_000 });
    return pg;
  }, 90_000);

  await step('open the ctxd view and the session from the sidebar', async () => {
    const icon = p.locator('.activitybar .action-item .action-label[aria-label^="ctxd"]').first();
    await icon.waitFor({ state: 'visible', timeout: 30_000 });
    await icon.click();
    await widenSidebar(p);
    const sessions = pane(p, 'Sessions');
    await row(sessions, 'calc').waitFor({ timeout: 30_000 });
    await row(sessions, 'Redesign the landing page').waitFor();
    await row(sessions, "Fix the calculator's rounding").click();
    const conversation = pane(p, 'Conversation');
    await row(conversation, 'Done: step 8 is fixed and the tests pass.').waitFor({ timeout: 30_000 });
    await row(conversation, /more entries/).waitFor();
    await waitForStatus(p, /^ctxd \d+k\/200k \(\d+%\)$/);
    await noErrorToasts(p);
    await p.waitForTimeout(500);
    await screenshot('session-open');
  });

  await step('an append from outside shows the new node and the new status bar text', async () => {
    const writer = SessionWriter.reopen(session.path);
    writer.user('Now make the CLI print results with two decimals.');
    writer.assistant('The CLI prints two decimals now; all 14 tests pass.', 112_000);
    const conversation = pane(p, 'Conversation');
    await row(conversation, 'The CLI prints two decimals now; all 14 tests pass.').waitFor({ timeout: 30_000 });
    const text = await waitForStatus(p, /^ctxd 112k\/200k \(56%\)$/);
    log(`status bar: ${text}`);
    await row(pane(p, 'Sessions'), /● live/).waitFor({ timeout: 10_000 });
    await p.waitForTimeout(300);
    await screenshot('live-append');
  });

  await step('the Context view draws the window by part, the timeline and the heaviest entries', async () => {
    await runCommand(p, 'ctxd: Show What Fills the Context');
    const view = contextFrame(p);
    await view.locator('#headline', { hasText: /^112k of 200k tokens \(56%\) · compaction at 184k · reserve 16k$/ }).waitFor({ timeout: 30_000 });
    for (const id of ['#bar', '#timeline']) {
      const box = await view.locator(id).boundingBox();
      if (!box || box.width < 100 || box.height < 60) {
        throw new Error(`the chart ${id} is not drawn: ${JSON.stringify(box)}`);
      }
    }
    const top = view.locator('#top button');
    if ((await top.count()) < 3) {
      throw new Error('fewer than three heaviest entries');
    }
    const first = (await top.first().innerText()).replace(/\s+/g, ' ');
    log(`heaviest entry: ${first}`);
    if (!/toolResult read/.test(first)) {
      throw new Error(`the heaviest entry is not a tool result: ${first}`);
    }
    if ((await view.locator('body').getAttribute('data-csp-violations')) !== '0') {
      throw new Error('the webview reported content security policy violations');
    }
    await p.waitForTimeout(300);
    await screenshot('context-view');
  });

  await step('Preview Compaction shows what would be summarised, tokens before and after', async () => {
    await runCommand(p, 'ctxd: Preview Compaction');
    const text = await editorText(p, 'tokens after (estimated)');
    if (!/Compaction preview/.test(text) || !/tokens before/.test(text)) {
      throw new Error(`unexpected preview: ${text.slice(0, 300)}`);
    }
    await p.waitForTimeout(300);
    await screenshot('preview-compaction');
  });

  await step('Compact Now with instructions: a spinner, then a ledger row', async () => {
    await runCommand(p, 'ctxd: Compact Now…');
    await answerInput(p, 'Keep every decision about rounding.');
    const spinning = await waitForStatus(p, /^ctxd compacting… 112k$/, 30_000);
    log(`status bar while compacting: ${spinning}`);
    await p.locator('.statusbar-item .codicon-sync.codicon-modifier-spin').first().waitFor({ timeout: 5000 });
    await notification(p, /ctxd: compacting/, 10_000);
    await p.waitForTimeout(500);
    await screenshot('compacting');
    const text = await notification(p, /ctxd: compacted \d+k → \d+(\.\d)?k tokens/, 90_000);
    log(`notification: ${text}`);
    if (model.requests() < 1) {
      throw new Error('the summariser never called the model');
    }
    const ledger = pane(p, 'Compactions');
    const ledgerRow = row(ledger, /manual/);
    await ledgerRow.waitFor({ timeout: 30_000 });
    const description = (await ledgerRow.innerText()).replace(/\s+/g, ' ');
    log(`ledger row: ${description}`);
    if (!/\d+k → \d+(\.\d)?k · (openai\/)?fake-summarizer · \d+(\.\d)? s/.test(description)) {
      throw new Error(`ledger row lacks its columns: ${description}`);
    }
    await row(pane(p, 'Conversation'), /COMPACTION/).waitFor({ timeout: 10_000 });
    // The Context view follows: the compaction is in its timeline, without asking.
    await contextFrame(p).locator('body[data-compactions="1"]').waitFor({ timeout: 30_000 });
    await waitForStatus(p, /^ctxd \d+k\/200k \(\d+%\)$/);
    await p.waitForTimeout(300);
    await screenshot('compacted-ledger');
    await ledgerRow.click();
    await editorText(p, /# Compaction .* manual/);
    await editorText(p, 'Keep every decision about rounding.');
    await p.waitForTimeout(300);
    await screenshot('ledger-summary');
  });

  await step('the Context view follows the live session: a turn after the compaction, the marker, light and dark', async () => {
    const view = contextFrame(p);
    const writer = SessionWriter.reopen(session.path);
    writer.user('Round the tax column too.');
    const leaf = writer.assistant('The tax column rounds half-even now.', 31_000);
    await view.locator(`body[data-leaf="${leaf}"]`).waitFor({ timeout: 30_000 });
    await view.locator('#headline', { hasText: /^31k of 200k tokens/ }).waitFor({ timeout: 10_000 });
    // The pictures: no toasts, the panel maximised, the pointer on the compaction's marker.
    await runCommand(p, 'Notifications: Clear All Notifications');
    await runCommand(p, 'View: Toggle Maximized Panel');
    await p.waitForTimeout(800);
    await hoverCompaction(p);
    await docsPicture(p, 'context-view-dark'); // first: screenshot() moves the pointer away
    await screenshot('context-compaction-dark');
    await setTheme(p, 'Light Modern');
    await view.locator('body.vscode-light').waitFor({ timeout: 20_000 });
    await p.waitForTimeout(500);
    await hoverCompaction(p);
    await docsPicture(p, 'context-view-light');
    await screenshot('context-compaction-light');
    await runCommand(p, 'View: Toggle Maximized Panel');
    await p.waitForTimeout(500);
    // A click on a heaviest entry selects it in the Conversation tree.
    await view.locator('#top button').first().click();
    await pane(p, 'Conversation').locator('.monaco-list-row.selected').first().waitFor({ timeout: 15_000 });
    await setTheme(p, 'Dark Modern');
    await view.locator('body.vscode-dark').waitFor({ timeout: 20_000 });
    if ((await view.locator('body').getAttribute('data-csp-violations')) !== '0') {
      throw new Error('the webview reported content security policy violations');
    }
  }, 90_000);

  await step('Branch Here from the context menu of an entry inside a collapsed run', async () => {
    const conversation = pane(p, 'Conversation');
    await row(conversation, /more entries/).click(); // expands the run: its entries are fetched now
    await row(conversation, 'Done: step 1 is fixed and the tests pass.').waitFor({ timeout: 15_000 });
    const target = await findRow(p, conversation, 'Done: step 5 is fixed and the tests pass.');
    await contextMenu(p, target, 'Branch Here…', () => screenshot('context-menu').then(() => undefined));
    await pickItem(p, 'Branch without a summary');
    const text = await notification(p, /ctxd: branched at/);
    log(`notification: ${text}`);
    await findRow(p, conversation, /Done: step 5 is fixed.*◀ leaf/);
    await waitForStatus(p, /^ctxd \d+k\/200k \(\d+%\)$/);
    await p.waitForTimeout(300);
    await screenshot('branched');
  });

  await step('an agent continuing on the new branch makes a branch point', async () => {
    // pi appends under the last line of the file: ctxd's leaf marker, which stands for the entry
    // we branched at.
    const writer = SessionWriter.reopen(session.path);
    writer.user('Different idea: use banker’s rounding instead.');
    const conversation = pane(p, 'Conversation');
    await row(conversation, /branch \d\/2/).waitFor({ timeout: 30_000 });
    await row(conversation, /Different idea: use banker’s rounding instead/).waitFor({ timeout: 30_000 });
    await p.waitForTimeout(300);
    await screenshot('branch-point');
  });

  await step('Label Entry and Show Entry from the tree', async () => {
    const conversation = pane(p, 'Conversation');
    const target = await findRow(p, conversation, /Different idea: use banker’s rounding instead.*leaf/);
    await contextMenu(p, target, 'Label Entry…');
    await answerInput(p, 'new plan');
    await findRow(p, conversation, /Different idea.*#new plan/);
    await (await findRow(p, conversation, /Different idea.*#new plan/)).click();
    const text = await editorText(p, '## Raw JSON');
    if (!/# user · \d+ tokens/.test(text) || !/"role": "user"/.test(text)) {
      throw new Error(`unexpected entry document: ${text.slice(0, 300)}`);
    }
    await p.waitForTimeout(300);
    await screenshot('label-and-entry');
  });

  await step('Show Context renders the context with token counts', async () => {
    await runCommand(p, 'ctxd: Show Context');
    const text = await editorText(p, '| context tokens |');
    if (!/# Context of Fix the calculator's rounding/.test(text) || !/\| # \| role \| tokens \| entry \| line \|/.test(text)) {
      throw new Error(`unexpected context document: ${text.slice(0, 300)}`);
    }
    await p.waitForTimeout(300);
    await screenshot('show-context');
  });

  await step('the status bar turns to the warning colour near the threshold', async () => {
    const writer = SessionWriter.reopen(session.path);
    writer.assistant('Rounding is done; the context is getting big.', 175_000);
    await waitForStatus(p, /^ctxd 175k\/200k \(88%\)$/);
    const item = p.locator('.statusbar-item', { hasText: /ctxd 175k/ }).first();
    const background = await item.evaluate(
      (el) => (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(el).backgroundColor,
    );
    log(`status bar background: ${background}`);
    if (/rgba\(0, 0, 0, 0\)|transparent/.test(background)) {
      throw new Error('the status bar item has no warning background');
    }
    await p.waitForTimeout(300);
    await screenshot('warning-status');
    await item.click();
    await p.locator('.quick-input-widget .monaco-list-row', { hasText: 'Compact Now…' }).first().waitFor({ timeout: 10_000 });
    await p.locator('.quick-input-widget .monaco-list-row', { hasText: 'Preview Compaction' }).first().waitFor();
    await p.keyboard.press('Escape');
  });

  await step('Restart Server replaces the daemon, empties and refills the views', async () => {
    const before = daemonPids();
    if (before.length !== 1) {
      throw new Error(`expected one ctxd daemon of this test, found ${before.length}`);
    }
    await runCommand(p, 'ctxd: Restart Server');
    const end = Date.now() + 30_000;
    let after = daemonPids();
    while (!(after.length === 1 && after[0] !== before[0]) && Date.now() < end) {
      await p.waitForTimeout(200);
      after = daemonPids();
    }
    if (!(after.length === 1 && after[0] !== before[0])) {
      throw new Error(`the daemon was not replaced: before ${before}, after ${after}`);
    }
    log(`daemon pid ${before[0]} → ${after[0]}`);
    await findRow(p, pane(p, 'Conversation'), /Different idea/, 30_000);
    await row(pane(p, 'Compactions'), /manual/).waitFor({ timeout: 30_000 });
    await waitForStatus(p, /^ctxd \d+k\/200k \(\d+%\)$/);
    await noErrorToasts(p);
    await p.waitForTimeout(300);
    await screenshot('after-restart');
  });

  await step('Fork Session from an entry opens the fork', async () => {
    const conversation = pane(p, 'Conversation');
    const target = await findRow(p, conversation, /Different idea: use banker’s rounding instead\.\s*\d+ tok · #new plan/);
    await contextMenu(p, target, 'Fork Session…');
    const text = await notification(p, /ctxd: forked at [0-9a-f]{8} into /);
    log(`notification: ${text}`);
    const sessions = pane(p, 'Sessions');
    await row(sessions, /Fix the calculator's rounding.*open/).waitFor({ timeout: 15_000 });
    // The list is redrawn as the fork is announced: wait for it to settle with both rows.
    const named = sessions.locator('.monaco-list-row', { hasText: "Fix the calculator's rounding" });
    const listedBy = Date.now() + 15_000;
    while ((await named.count()) !== 2 && Date.now() < listedBy) {
      await p.waitForTimeout(200);
    }
    if ((await named.count()) !== 2) {
      throw new Error('the fork is not listed next to its session');
    }
    await row(conversation, /Different idea: use banker’s rounding instead.*leaf/).waitFor({ timeout: 15_000 });
    await row(pane(p, 'Compactions'), /No compactions in this session yet/).waitFor({ timeout: 15_000 });
    await noErrorToasts(p);
    await p.waitForTimeout(300);
    await screenshot('forked');
  });
}

/** The ctxd daemons this run's VS Code started (found by the config path only we use). */
function daemonPids(): number[] {
  const marker = `CTXD_CONFIG=${join(WORK, 'no-ctxd-config.json')}`;
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      const environ = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (environ.includes(marker) && /ctxd/.test(cmdline) && /serve/.test(cmdline)) {
        out.push(Number(name));
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

const watchdog = setTimeout(() => {
  log(`the whole run took longer than ${TOTAL_MS} ms: giving up`);
  void screenshot('FAILED-timeout').finally(() => cleanup().finally(() => process.exit(1)));
}, TOTAL_MS);

main()
  .then(async () => {
    await cleanup();
    clearTimeout(watchdog);
    log(`passed; screenshots in ${ARTIFACTS}`);
    process.exit(0);
  })
  .catch(async (error: Error) => {
    log(`FAILED: ${error.stack ?? error.message}`);
    await cleanup();
    clearTimeout(watchdog);
    process.exit(1);
  });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    void cleanup().finally(() => process.exit(130));
  });
}
