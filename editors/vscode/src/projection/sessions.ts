/**
 * The Sessions view as pure data: session/list summaries grouped by project folder (the session's
 * cwd), newest first, named from session_info, with a live marker on sessions that changed lately.
 */

import type { SessionSummary } from '@ctxd/client';
import { basename, formatAge, formatInt, oneLine, tildify } from './format';

/** A session counts as live this long after its last change. */
export const LIVE_MS = 30_000;

export interface ProjectNode {
  kind: 'project';
  key: string;
  cwd: string;
  sessions: SessionNode[];
  live: boolean;
}

export interface SessionNode {
  kind: 'session';
  key: string;
  summary: SessionSummary;
  live: boolean;
  open: boolean;
}

export interface SessionsNoticeNode {
  kind: 'notice';
  key: string;
  message: string;
}

export type SessionsNode = ProjectNode | SessionNode | SessionsNoticeNode;

export interface SessionsInput {
  sessions: readonly SessionSummary[];
  /** Last change seen per session path (ms since the epoch). */
  changed: ReadonlyMap<string, number>;
  openPath: string | undefined;
  now: number;
}

export function sessionName(s: SessionSummary): string {
  if (s.name) {
    return s.name;
  }
  if (s.title) {
    return oneLine(s.title, 60);
  }
  return s.id ? `session ${s.id.slice(0, 8)}` : basename(s.path);
}

export function isLive(path: string, changed: ReadonlyMap<string, number>, now: number): boolean {
  const t = changed.get(path);
  return t !== undefined && now - t < LIVE_MS;
}

/** Modification time in ms, counting changes seen since the listing. */
function modifiedMs(s: SessionSummary, changed: ReadonlyMap<string, number>): number {
  return Math.max(s.modified * 1000, changed.get(s.path) ?? 0);
}

export function projectSessions(input: SessionsInput): ProjectNode[] {
  const groups = new Map<string, SessionNode[]>();
  for (const summary of input.sessions) {
    const cwd = summary.cwd || '(unknown folder)';
    const node: SessionNode = {
      kind: 'session',
      key: `session:${summary.path}`,
      summary,
      live: isLive(summary.path, input.changed, input.now),
      open: summary.path === input.openPath,
    };
    const list = groups.get(cwd);
    if (list) {
      list.push(node);
    } else {
      groups.set(cwd, [node]);
    }
  }
  const projects: ProjectNode[] = [];
  for (const [cwd, sessions] of groups) {
    sessions.sort(
      (a, b) => modifiedMs(b.summary, input.changed) - modifiedMs(a.summary, input.changed) || a.key.localeCompare(b.key),
    );
    projects.push({ kind: 'project', key: `project:${cwd}`, cwd, sessions, live: sessions.some((s) => s.live) });
  }
  const newest = (p: ProjectNode) => modifiedMs(p.sessions[0]!.summary, input.changed);
  projects.sort((a, b) => newest(b) - newest(a) || a.cwd.localeCompare(b.cwd));
  return projects;
}

export interface SessionsPresentation {
  label: string;
  description: string;
  tooltip: string;
  icon: string;
  iconColor?: string;
  expandable: 'none' | 'collapsed' | 'expanded';
}

export function presentSession(node: SessionsNode, now: number, home?: string): SessionsPresentation {
  switch (node.kind) {
    case 'project':
      return {
        label: basename(node.cwd),
        description: `${tildify(node.cwd, home)}${node.live ? ' · live' : ''}`,
        tooltip: `${node.cwd}\n${node.sessions.length} session${node.sessions.length === 1 ? '' : 's'}`,
        icon: 'folder',
        iconColor: node.live ? 'ctxd.liveForeground' : undefined,
        expandable: 'expanded',
      };
    case 'session': {
      const s = node.summary;
      const bits: string[] = [];
      if (node.live) {
        bits.push('● live');
      }
      if (node.open) {
        bits.push('open');
      }
      if (s.parentSession) {
        bits.push('fork');
      }
      if (s.readOnly) {
        bits.push(`${s.agent ?? 'transcript'} · read-only`);
      }
      bits.push(formatAge(s.modified * 1000, now));
      bits.push(`${formatInt(s.entries)} entries`);
      if (s.error) {
        bits.push(`⚠ ${s.error}`);
      }
      const tooltip = [
        sessionName(s),
        s.name && s.title ? oneLine(s.title, 200) : '',
        `${s.path}`,
        `id ${s.id}`,
        `created ${s.created}`,
        `${formatInt(s.entries)} entries, ${formatInt(s.size)} bytes`,
        s.parentSession ? `forked from ${s.parentSession}` : '',
        s.readOnly ? `a ${s.agent ?? 'other agent'} transcript, read-only: compacting it compacts a pi fork` : '',
        s.error ? `problem: ${s.error}` : '',
      ]
        .filter(Boolean)
        .join('\n');
      return {
        label: sessionName(s),
        description: bits.filter(Boolean).join(' · '),
        tooltip,
        icon: node.live ? 'circle-filled' : s.error ? 'warning' : node.open ? 'eye' : s.readOnly ? 'lock' : 'comment-discussion',
        iconColor: node.live ? 'ctxd.liveForeground' : undefined,
        expandable: 'none',
      };
    }
    case 'notice':
      return { label: node.message, description: '', tooltip: node.message, icon: 'info', expandable: 'none' };
  }
}
