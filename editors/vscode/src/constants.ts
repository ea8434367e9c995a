/** Every identifier the extension shares with package.json. */

export const EXTENSION_ID = 'ctxd.ctxd';
export const OUTPUT_CHANNEL = 'ctxd';
export const DOC_SCHEME = 'ctxd';
export const NODE_SCHEME = 'ctxd-node';

export const View = {
  container: 'ctxd',
  sessions: 'ctxd.sessions',
  conversation: 'ctxd.conversation',
  compactions: 'ctxd.compactions',
  context: 'ctxd.context',
} as const;

export const Command = {
  openSession: 'ctxd.openSession',
  refresh: 'ctxd.refresh',
  compactNow: 'ctxd.compactNow',
  previewCompaction: 'ctxd.previewCompaction',
  branchHere: 'ctxd.branchHere',
  branchHereWithSummary: 'ctxd.branchHereWithSummary',
  forkSession: 'ctxd.forkSession',
  labelEntry: 'ctxd.labelEntry',
  pinEntry: 'ctxd.pinEntry',
  unpinEntry: 'ctxd.unpinEntry',
  copyEntryId: 'ctxd.copyEntryId',
  showEntry: 'ctxd.showEntry',
  showContext: 'ctxd.showContext',
  showSummary: 'ctxd.showSummary',
  showActions: 'ctxd.showActions',
  restartServer: 'ctxd.restartServer',
  showLog: 'ctxd.showLog',
  loadMore: 'ctxd.loadMore',
  revealLeaf: 'ctxd.revealLeaf',
  closeSession: 'ctxd.closeSession',
  revealEntry: 'ctxd.revealEntry',
  showComposition: 'ctxd.showComposition',
} as const;

export const Config = {
  section: 'ctxd',
  serverCommand: 'server.command',
  serverEnv: 'server.env',
  sessionRoots: 'sessionRoots',
  transcriptRoots: 'transcriptRoots',
  compaction: 'compaction',
  model: 'model',
  autoCompact: 'autoCompact',
  autoCompactExternal: 'autoCompactExternal',
  collapse: 'conversation.collapseRunsLongerThan',
  followLeaf: 'conversation.followLeaf',
} as const;

/** Context keys for when-clauses. */
export const ContextKey = {
  serverRunning: 'ctxd.serverRunning',
  sessionOpen: 'ctxd.sessionOpen',
  compacting: 'ctxd.compacting',
} as const;
