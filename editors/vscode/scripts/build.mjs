// Bundle the extension (and, with --tests, the unit tests) with esbuild.
//   node scripts/build.mjs            -> dist/extension.js, dist/webview.{js,css} (what the .vsix ships)
//   node scripts/build.mjs --tests    -> out/test/*.test.js, with `vscode` swapped for test/vscode-mock.ts
//   node scripts/build.mjs --e2e      -> out/e2e/run.js (the end-to-end driver)
import { build } from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
// The daemon client is shared with pi's extension (clients/typescript), bundled in from its source.
const shared = { '@ctxd/client': join(root, '../../clients/typescript/src/index.ts') };
const common = { bundle: true, platform: 'node', target: 'node20', format: 'cjs', sourcemap: true, logLevel: 'warning', alias: shared };

if (args.has('--tests')) {
  rmSync(join(root, 'out/test'), { recursive: true, force: true });
  const tests = readdirSync(join(root, 'test')).filter((f) => f.endsWith('.test.ts'));
  await build({
    ...common,
    entryPoints: tests.map((f) => join(root, 'test', f)),
    outdir: join(root, 'out/test'),
    alias: { ...shared, vscode: join(root, 'test/vscode-mock.ts') },
  });
} else if (args.has('--e2e')) {
  await build({ ...common, entryPoints: [join(root, 'e2e/run.ts')], outfile: join(root, 'out/e2e/run.js'), external: ['playwright-core'] });
} else {
  // The Context view's page (Chart.js bundled in) and its stylesheet: dist/webview.js, dist/webview.css.
  const page = { bundle: true, platform: 'browser', target: 'es2022', logLevel: 'warning', minify: args.has('--minify') };
  await build({ ...page, entryPoints: [join(root, 'webview/context.ts')], outfile: join(root, 'dist/webview.js'), format: 'iife' });
  await build({ ...page, entryPoints: [join(root, 'webview/context.css')], outfile: join(root, 'dist/webview.css') });
  await build({
    ...common,
    entryPoints: [join(root, 'src/extension.ts')],
    outfile: join(root, 'dist/extension.js'),
    external: ['vscode'],
    minify: args.has('--minify'),
    sourcemap: !args.has('--minify'),
  });
}
