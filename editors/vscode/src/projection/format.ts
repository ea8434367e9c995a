/** Small formatting helpers shared by the views, the status bar and the documents. */

/** 950, 1.2k, 12k, 112k, 1.2M. */
export function formatTokens(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) {
    return '?';
  }
  const abs = Math.abs(n);
  if (abs < 1000) {
    return String(Math.round(n));
  }
  if (abs < 10_000) {
    return `${trim((n / 1000).toFixed(1))}k`;
  }
  if (abs < 1_000_000) {
    return `${Math.round(n / 1000)}k`;
  }
  return `${trim((n / 1_000_000).toFixed(1))}M`;
}

function trim(s: string): string {
  return s.endsWith('.0') ? s.slice(0, -2) : s;
}

/** 12,345 */
export function formatInt(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) {
    return '?';
  }
  return Math.round(n).toLocaleString('en-US');
}

/** 850 ms, 3.2 s, 2 min 5 s */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) {
    return '?';
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60_000) {
    return `${trim((ms / 1000).toFixed(1))} s`;
  }
  const min = Math.floor(ms / 60_000);
  const sec = Math.round((ms % 60_000) / 1000);
  return sec ? `${min} min ${sec} s` : `${min} min`;
}

/** $0.0042, $1.23, or "free" for a zero cost; undefined when unknown. */
export function formatCost(cost: number | null | undefined): string | undefined {
  if (cost === null || cost === undefined || !Number.isFinite(cost)) {
    return undefined;
  }
  if (cost === 0) {
    return '$0';
  }
  if (cost < 0.01) {
    return `$${cost.toPrecision(2)}`;
  }
  return `$${cost.toFixed(2)}`;
}

/** Milliseconds since the epoch from an ISO timestamp, seconds or milliseconds. */
export function toMillis(when: string | number | null | undefined): number | undefined {
  if (when === null || when === undefined) {
    return undefined;
  }
  if (typeof when === 'number') {
    return when < 1e12 ? when * 1000 : when;
  }
  const t = Date.parse(when);
  return Number.isNaN(t) ? undefined : t;
}

/** "just now", "5 s ago", "3 min ago", "2 h ago", "4 d ago", then the date. */
export function formatAge(when: string | number | null | undefined, now: number): string {
  const t = toMillis(when);
  if (t === undefined) {
    return '';
  }
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) {
    return 'just now';
  }
  if (s < 60) {
    return `${s} s ago`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min ago`;
  }
  if (s < 86_400) {
    return `${Math.floor(s / 3600)} h ago`;
  }
  if (s < 30 * 86_400) {
    return `${Math.floor(s / 86_400)} d ago`;
  }
  return formatWhen(t, now);
}

/** "14:03:12" today, "Nov 21 14:03" this year, else "2024-11-21 14:03" (local time). */
export function formatWhen(when: string | number | null | undefined, now: number): string {
  const t = toMillis(when);
  if (t === undefined) {
    return '?';
  }
  const d = new Date(t);
  const today = new Date(now);
  const pad = (n: number) => String(n).padStart(2, '0');
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (d.toDateString() === today.toDateString()) {
    return `${hm}:${pad(d.getSeconds())}`;
  }
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  if (d.getFullYear() === today.getFullYear()) {
    return `${months[d.getMonth()]} ${d.getDate()} ${hm}`;
  }
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
}

/** The last path component, for either separator. */
export function basename(path: string): string {
  const parts = path.split(/[\\/]+/).filter(Boolean);
  return parts.length ? parts[parts.length - 1]! : path;
}

/** ~/x for paths under home. */
export function tildify(path: string, home: string | undefined): string {
  if (home && home !== '/' && (path === home || path.startsWith(home.endsWith('/') ? home : `${home}/`))) {
    return `~${path.slice(home.replace(/\/$/, '').length)}`;
  }
  return path;
}

export function oneLine(text: string, limit = 100): string {
  const flat = text.split(/\s+/).filter(Boolean).join(' ');
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}
