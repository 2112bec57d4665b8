// `keys rotate`: new signing keys, published before they sign.
import { ensureSigningKeys, rotateSigningKeys } from '../../oauth/keys.ts';
import { keyTiming } from '../../oauth/key-manager.ts';
import { iso } from '../../time.ts';
import { by, type CommandDef } from '../command.ts';

export const keysCommands: CommandDef[] = [
  {
    group: 'keys',
    name: 'rotate',
    summary: 'add new signing keys (ES256 and RS256); they sign after two refresh intervals',
    options: {},
    async run(ctx) {
      await ensureSigningKeys(ctx.store, ctx.keys);
      const added = await rotateSigningKeys(ctx.store, ctx.keys, keyTiming(ctx.config), by(ctx));
      const view = added.map((k) => ({ kid: k.kid, alg: k.alg, activates_at: iso(k.activatesAt) }));
      return ctx.json
        ? view
        : `${view.map((k) => `new ${k.alg} key ${k.kid}, signs from ${k.activates_at}`).join('\n')}\nThe previous keys stay in the JWKS until tokens they signed have expired.`;
    },
  },
];
