/**
 * The Context view's page (bundled by esbuild into dist/webview.js; runs in the webview, not in the
 * extension host). It draws what the extension posts (a CompositionModel) with Chart.js: the window
 * as one stacked horizontal bar with the threshold line and the reserve shaded, the timeline as a
 * line with compaction, overflow and branch markers (hover: tokens before → after, trigger,
 * summariser), and the heaviest entries as buttons that reveal the entry in the Conversation tree.
 * Colours come from the theme's CSS variables and are read again when the theme changes.
 */

import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartDataset,
  type Plugin,
} from 'chart.js';
import type { CompositionModel } from '../src/projection/composition';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip, Legend);

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };
const vscode = acquireVsCodeApi();

let model: CompositionModel | null = null;
let bar: Chart | undefined;
let line: Chart | undefined;
let violations = 0;

document.addEventListener('securitypolicyviolation', (e) => {
  violations++;
  document.body.dataset.cspViolations = String(violations);
  vscode.postMessage({ type: 'csp', detail: `${e.violatedDirective} ${e.blockedURI}` });
});
document.body.dataset.cspViolations = '0';

function css(name: string, fallback = '#888'): string {
  const value = getComputedStyle(document.body).getPropertyValue(name).trim();
  return value || fallback;
}

function el<T extends HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}

/** The threshold as a line across the bar, the reserve (threshold to window) shaded. */
const windowLines: Plugin<'bar'> = {
  id: 'ctxdWindowLines',
  afterDatasetsDraw(chart) {
    const m = model;
    if (!m) {
      return;
    }
    const { ctx, chartArea, scales } = chart;
    const x = scales.x!;
    const at = x.getPixelForValue(m.threshold);
    const end = x.getPixelForValue(m.window);
    ctx.save();
    ctx.fillStyle = css('--vscode-editorWarning-foreground', '#cca700');
    ctx.globalAlpha = 0.15;
    ctx.fillRect(at, chartArea.top, end - at, chartArea.bottom - chartArea.top);
    ctx.globalAlpha = 1;
    ctx.strokeStyle = css('--vscode-editorWarning-foreground', '#cca700');
    ctx.lineWidth = 2;
    ctx.setLineDash([]);
    ctx.beginPath();
    ctx.moveTo(at, chartArea.top - 4);
    ctx.lineTo(at, chartArea.bottom + 4);
    ctx.stroke();
    ctx.fillStyle = css('--vscode-descriptionForeground', '#888');
    ctx.font = `11px ${css('--vscode-font-family', 'sans-serif')}`;
    ctx.textAlign = 'right';
    ctx.fillText('threshold', at - 4, chartArea.top - 2);
    ctx.textAlign = 'left';
    ctx.fillText('reserve', at + 4, chartArea.top - 2);
    ctx.restore();
  },
};

function drawBar(m: CompositionModel): void {
  const foreground = css('--vscode-foreground');
  const grid = css('--vscode-widget-border', css('--vscode-panel-border', '#8884'));
  const datasets: ChartDataset<'bar'>[] = m.segments.map((s) => ({
    label: s.label,
    data: [s.tokens],
    backgroundColor: css(s.color),
    borderColor: css('--vscode-sideBar-background', '#0000'),
    borderWidth: 1,
    barThickness: 26,
  }));
  const details = m.segments.map((s) => s.detail);
  if (bar) {
    bar.destroy();
  }
  bar = new Chart(el<HTMLCanvasElement>('bar'), {
    type: 'bar',
    data: { labels: ['context'], datasets },
    plugins: [windowLines],
    options: {
      indexAxis: 'y',
      animation: false,
      maintainAspectRatio: false,
      layout: { padding: { top: 14 } },
      scales: {
        x: {
          stacked: true,
          min: 0,
          max: m.window,
          ticks: { color: foreground, callback: (v) => short(Number(v)) },
          grid: { color: grid },
        },
        y: { stacked: true, display: false },
      },
      plugins: {
        legend: { position: 'bottom', labels: { color: foreground, boxWidth: 10, boxHeight: 10, font: { size: 11 } } },
        tooltip: { callbacks: { label: (item) => details[item.datasetIndex] ?? '' } },
      },
    },
  });
}

/** Where the last compaction's marker is drawn (canvas pixels, after every layout), so that a
 * pointer can be put on it: body[data-compaction-marker="x,y"]. */
const markerSpot: Plugin<'line'> = {
  id: 'ctxdMarkerSpot',
  afterRender(chart) {
    const points = chart.getDatasetMeta(2).data.filter((_, i) => (chart.data.datasets[2]?.data[i] ?? null) !== null);
    const last = points[points.length - 1];
    document.body.dataset.compactionMarker = last ? `${Math.round(last.x)},${Math.round(last.y)}` : '';
  },
};

function drawTimeline(m: CompositionModel): void {
  const foreground = css('--vscode-foreground');
  const grid = css('--vscode-widget-border', css('--vscode-panel-border', '#8884'));
  const colors = {
    compaction: css('--vscode-charts-green'),
    overflow: css('--vscode-charts-red'),
    branch: css('--vscode-charts-purple'),
  };
  const series = (kind: keyof typeof colors): (number | null)[] => {
    const out: (number | null)[] = m.timeline.tokens.map(() => null);
    for (const mark of m.timeline.marks) {
      if (mark.kind === kind) {
        out[mark.index] = mark.tokens;
      }
    }
    return out;
  };
  const texts = new Map<string, string>();
  for (const mark of m.timeline.marks) {
    const key = `${mark.kind}:${mark.index}`;
    texts.set(key, texts.has(key) ? `${texts.get(key)}\n${mark.text}` : mark.text);
  }
  const marker = (kind: keyof typeof colors, label: string, style: 'triangle' | 'crossRot' | 'rectRot'): ChartDataset<'line'> => ({
    label,
    data: series(kind),
    showLine: false,
    pointStyle: style,
    pointRadius: 7,
    pointHoverRadius: 9,
    pointBorderWidth: 2,
    borderColor: colors[kind],
    backgroundColor: colors[kind],
  });
  const datasets: ChartDataset<'line'>[] = [
    {
      label: 'context tokens',
      data: m.timeline.tokens,
      borderColor: css('--vscode-charts-blue'),
      backgroundColor: css('--vscode-charts-blue'),
      borderWidth: 2,
      pointRadius: m.timeline.tokens.length > 60 ? 0 : 2,
      tension: 0,
    },
    {
      label: 'threshold',
      data: m.timeline.tokens.map(() => m.threshold),
      borderColor: css('--vscode-editorWarning-foreground', '#cca700'),
      borderDash: [6, 4],
      borderWidth: 1,
      pointRadius: 0,
      pointHitRadius: 0,
    },
    marker('compaction', 'compaction', 'triangle'),
    marker('overflow', 'overflow', 'crossRot'),
    marker('branch', 'branch', 'rectRot'),
  ];
  if (line) {
    line.destroy();
  }
  line = new Chart(el<HTMLCanvasElement>('timeline'), {
    type: 'line',
    data: { labels: m.timeline.labels, datasets },
    plugins: [markerSpot],
    options: {
      animation: false,
      maintainAspectRatio: false,
      interaction: { mode: 'nearest', intersect: false },
      scales: {
        x: { ticks: { color: foreground, maxTicksLimit: 8, callback: (_, i) => String(i + 1) }, grid: { color: grid } },
        y: { min: 0, suggestedMax: m.window, ticks: { color: foreground, callback: (v) => short(Number(v)) }, grid: { color: grid } },
      },
      plugins: {
        legend: { position: 'bottom', labels: { color: foreground, boxWidth: 10, boxHeight: 10, font: { size: 11 } } },
        tooltip: {
          filter: (item) => item.datasetIndex !== 1 && item.raw !== null,
          callbacks: {
            label: (item) => {
              const kind = ['tokens', 'threshold', 'compaction', 'overflow', 'branch'][item.datasetIndex];
              if (kind === 'tokens') {
                return `${Number(item.raw).toLocaleString('en-US')} tokens`;
              }
              return (texts.get(`${kind}:${item.dataIndex}`) ?? '').split('\n');
            },
          },
        },
      },
    },
  });
}

function drawTop(m: CompositionModel): void {
  const list = el<HTMLOListElement>('top');
  list.replaceChildren(
    ...m.top.map((e) => {
      const item = document.createElement('li');
      const button = document.createElement('button');
      button.type = 'button';
      button.dataset.entry = e.entryId;
      button.title = `Reveal ${e.entryId} in the Conversation view`;
      const id = document.createElement('span');
      id.className = 'id';
      id.textContent = e.entryId;
      const what = document.createElement('span');
      what.className = 'what';
      what.textContent = e.label;
      const tokens = document.createElement('span');
      tokens.className = 'tokens';
      tokens.textContent = `${e.tokens.toLocaleString('en-US')} · ${e.percent}%`;
      button.append(id, what, tokens);
      item.append(button);
      return item;
    }),
  );
}

el<HTMLOListElement>('top').addEventListener('click', (event) => {
  const button = (event.target as HTMLElement).closest('button');
  const entryId = button?.dataset.entry;
  if (entryId) {
    vscode.postMessage({ type: 'reveal', entryId });
  }
});

function short(n: number): string {
  return n >= 1000 ? `${Math.round(n / 1000)}k` : String(n);
}

function render(): void {
  const m = model;
  el('empty').hidden = m !== null;
  el('main').hidden = m === null;
  if (!m) {
    return;
  }
  el('headline').textContent = m.headline;
  el('timeline-summary').textContent = m.timelineSummary;
  drawBar(m);
  drawTimeline(m);
  drawTop(m);
  // What the view shows, for tests and assistive tools: the leaf and the compactions (and, from
  // markerSpot, where the last compaction's marker is drawn).
  document.body.dataset.leaf = m.leafId ?? '';
  document.body.dataset.compactions = String(m.timeline.marks.filter((x) => x.kind === 'compaction').length);

}

window.addEventListener('message', (event: MessageEvent<{ type: string; model: CompositionModel | null }>) => {
  if (event.data?.type === 'composition') {
    model = event.data.model;
    render();
  }
});

// VS Code swaps the body's theme class (vscode-light, vscode-dark, vscode-high-contrast): redraw in the new colours.
new MutationObserver(() => render()).observe(document.body, { attributes: true, attributeFilter: ['class'] });

vscode.postMessage({ type: 'ready' });
