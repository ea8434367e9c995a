/**
 * A test helper extension: `/nav ENTRY [INSTRUCTIONS]` moves pi's leaf with a branch summary
 * (pi's RPC mode has no tree command; extension commands may navigate).
 */

import type { ExtensionAPI } from '@earendil-works/pi-coding-agent';

export default function nav(pi: ExtensionAPI): void {
  pi.registerCommand('nav', {
    description: 'test helper: navigate the tree, summarising the branch left',
    handler: async (args, ctx) => {
      const [target, ...rest] = args.trim().split(/\s+/);
      const result = await ctx.navigateTree(target ?? '', {
        summarize: true,
        customInstructions: rest.length ? rest.join(' ') : undefined,
      });
      ctx.ui.notify(`nav ${JSON.stringify({ cancelled: result.cancelled })}`, 'info');
    },
  });
}
