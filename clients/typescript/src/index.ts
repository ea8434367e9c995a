/** ctxd's TypeScript client: the daemon's protocol types, the client, and its JSON-RPC layer. */

export * from './protocol';
export * from './client';
export {
  CancellationTokenSource,
  Connection,
  Emitter,
  FrameReader,
  ResponseError,
  frame,
  type CancellationToken,
  type Disposable,
  type Event,
} from './jsonrpc';
