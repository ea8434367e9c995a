/**
 * ctxd's TypeScript client, shared with the VS Code extension (clients/typescript). pi loads this
 * extension as TypeScript from the repository, so the client is imported from its source: one copy.
 */

export * from '../../../clients/typescript/src/index';
