/**
 * ctxd's TypeScript client (clients/typescript). opencode loads this plugin as TypeScript from the
 * repository, so the client is imported from its source: one copy, shared with pi and VS Code.
 */

export * from '../../../clients/typescript/src/index';
