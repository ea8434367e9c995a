/**
 * The open session's composition, kept current: asked for when the open session changes (or the
 * daemon restarts), then taken from context/compositionChanged, which the daemon sends for the
 * session from then on. No VS Code API: the Context view draws what this holds.
 */

import { Emitter, type CtxdClient, type Event } from '@ctxd/client';
import type { Composition } from '@ctxd/client';
import type { Store } from './state';

export type FeedClient = Pick<CtxdClient, 'composition' | 'onCompositionChanged'>;

export class CompositionFeed {
  /** The open session's composition, once known. */
  latest: Composition | undefined;
  private followed: { client: FeedClient; path: string } | undefined;
  private listening: { client: FeedClient; dispose(): void } | undefined;
  private readonly emitter = new Emitter<Composition | undefined>();
  readonly onDidChange: Event<Composition | undefined> = this.emitter.event;
  private readonly subscriptions: { dispose(): void }[];

  constructor(
    private readonly store: Store,
    private readonly client: () => FeedClient | undefined,
    private readonly top = 10,
  ) {
    this.subscriptions = [store.onDidChangeTree(() => void this.sync()), store.onDidChangeStatus(() => void this.sync())];
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    this.listening?.dispose();
    this.emitter.dispose();
  }

  /** Follow the open session with the running client (asking again after a restart). */
  async sync(): Promise<void> {
    const client = this.client();
    const path = this.store.current?.path;
    if (!client || !path || !this.store.connected) {
      if (this.latest) {
        this.latest = undefined;
        this.followed = undefined;
        this.emitter.fire(undefined);
      }
      return;
    }
    if (this.listening?.client !== client) {
      this.listening?.dispose();
      const sub = client.onCompositionChanged((c) => this.take(c));
      this.listening = { client, dispose: () => sub.dispose() };
    }
    if (this.followed?.client === client && this.followed.path === path) {
      return;
    }
    this.followed = { client, path };
    if (this.latest?.session !== path) {
      this.latest = undefined;
      this.emitter.fire(undefined);
    }
    try {
      this.take(await client.composition(path, { top: this.top }));
    } catch {
      if (this.followed?.path === path) {
        this.followed = undefined; // asked again on the next change
      }
    }
  }

  private take(c: Composition): void {
    if (c.session !== this.store.current?.path) {
      return;
    }
    this.latest = c;
    this.emitter.fire(c);
  }
}
