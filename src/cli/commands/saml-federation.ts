// `saml federation` commands: trust a federation's signed metadata aggregate (its SPs are then
// served without being added one by one), list, show, refresh and remove it (docs/saml.md,
// "Joining a federation").
import { readFileSync } from 'node:fs';
import { badRequest } from '../../errors.ts';
import { listFederationEntities } from '../../store/saml-federations.ts';
import { listFederationUpstreamRows } from '../../store/upstream-saml.ts';
import {
  addFederation,
  federationSettings,
  findFederationView,
  listFederationViews,
  refreshFederation,
  removeFederation,
  updateFederation,
  type FederationView,
} from '../../service-providers/federations.ts';
import { RELEASE_POLICIES } from '../../service-providers/entity-categories.ts';
import { iso } from '../../time.ts';
import { by, durationOption, intOption, optional, required, table, type CommandDef } from '../command.ts';

function readCertificateFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw badRequest(`--cert ${path}: ${code === 'ENOENT' ? 'no such file' : 'cannot be read'}; nothing was added`);
  }
}

function viewText(view: FederationView): string {
  const lines = Object.entries(view).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') || '-' : String(v ?? '-')]);
  const width = Math.max(...lines.map(([k]) => k!.length));
  return lines.map(([k, v]) => `${k!.padEnd(width)}  ${v}`).join('\n');
}

const LIST_COLUMNS = ['id', 'state', 'entities', 'valid_until', 'releases', 'url'];
const SHOWN_ENTITIES = 100;

export const samlFederationCommands: CommandDef[] = [
  {
    group: 'saml',
    name: 'federation add',
    summary:
      "trust a federation's signed metadata aggregate: its service providers can sign in without being added one by one",
    options: {
      url: { type: 'string', value: '<https URL>', required: true, description: 'where the aggregate is published' },
      cert: {
        type: 'string',
        value: '<file>',
        required: true,
        description: "the federation's metadata-signing certificate (PEM), obtained from the federation out of band",
      },
      'max-validity': {
        type: 'string',
        value: '<duration>',
        description: 'refuse an aggregate whose validUntil is further away than this (default 14d)',
      },
      refresh: {
        type: 'string',
        value: '<duration>',
        description: 'fetch the aggregate again this often (default 1h)',
      },
      release: {
        type: 'string',
        value: '<categories>',
        description: `entity categories whose attributes are released to SPs carrying them, comma-separated: ${RELEASE_POLICIES.join(', ')}`,
      },
      mdq: { type: 'string', value: '<base URL>', description: "the federation's metadata query (MDQ) service" },
      'require-signed-requests': {
        type: 'boolean',
        description: "refuse unsigned AuthnRequests from the federation's SPs, whatever their metadata says",
      },
    },
    async run(ctx, v) {
      const maxValidity = optional(v, 'max-validity');
      const refresh = optional(v, 'refresh');
      const release = optional(v, 'release');
      const mdq = optional(v, 'mdq');
      const summary = await addFederation(
        ctx.store,
        federationSettings(ctx.config),
        {
          url: required(v, 'url'),
          certificate: readCertificateFile(required(v, 'cert')),
          ...(maxValidity !== undefined ? { maxValidityMs: durationOption(maxValidity, 'max-validity') } : {}),
          ...(refresh !== undefined ? { refreshMs: durationOption(refresh, 'refresh') } : {}),
          ...(release !== undefined ? { releases: release.split(',') } : {}),
          ...(mdq !== undefined ? { mdqUrl: mdq } : {}),
          requireSignedRequests: v['require-signed-requests'] === true,
        },
        by(ctx),
      );
      if (ctx.json) return summary;
      const lines = [
        `added federation ${summary.id} (${summary.name ?? summary.url}): ${summary.entities} service providers, valid until ${summary.valid_until}`,
      ];
      for (const s of summary.skipped.slice(0, 20)) lines.push(`left out ${s.entityId}: ${s.reason}`);
      if (summary.skipped.length > 20) lines.push(`... and ${summary.skipped.length - 20} more left out`);
      return lines.join('\n');
    },
  },
  {
    group: 'saml',
    name: 'federation list',
    summary: 'list the trusted federations with their state and validity',
    options: {},
    async run(ctx) {
      const views = await listFederationViews(ctx.store);
      return ctx.json
        ? views
        : table(
            views.map((x) => ({ ...x, releases: x.releases.join(',') })),
            LIST_COLUMNS,
          );
    },
  },
  {
    group: 'saml',
    name: 'federation show',
    summary:
      'show a federation, its last fetch, (the first 100 of) its service providers and the upstream providers taken from it',
    args: [{ name: 'id', description: 'the federation id (from list)' }],
    options: {},
    async run(ctx, _v, [id]) {
      const view = await findFederationView(ctx.store, intOption(id, 'id'));
      const entities = (await listFederationEntities(ctx.store.db, view.id, SHOWN_ENTITIES)).map((e) => ({
        entity_id: e.entity_id,
        source: e.source,
        categories: JSON.parse(e.categories) as string[],
        valid_until: iso(Number(e.valid_until)),
      }));
      const upstreams = (await listFederationUpstreamRows(ctx.store.db, view.id)).map((p) => ({
        id: p.id,
        org_id: Number(p.org_id),
        entity_id: p.saml_entity_id,
        missing_since: p.saml_federation_missing_since === null ? null : iso(Number(p.saml_federation_missing_since)),
      }));
      if (ctx.json) return { ...view, service_providers: entities, upstream_providers: upstreams };
      const list = entities.map((e) => `  ${e.entity_id}  ${e.source}  ${e.categories.join(' ') || '-'}`);
      const bound = upstreams.map(
        (p) =>
          `  ${p.id}  organization ${p.org_id}  ${p.entity_id ?? '-'}${p.missing_since ? `  missing since ${p.missing_since}` : ''}`,
      );
      const lines = [viewText(view), '', 'service providers:', ...list];
      if (bound.length > 0) lines.push('', 'upstream providers taken from it:', ...bound);
      return lines.join('\n');
    },
  },
  {
    group: 'saml',
    name: 'federation update',
    summary: "change a federation's policy for its service providers",
    args: [{ name: 'id', description: 'the federation id' }],
    options: {
      'require-signed-requests': {
        type: 'boolean',
        description: "refuse unsigned AuthnRequests from the federation's SPs, whatever their metadata says",
      },
      'no-require-signed-requests': {
        type: 'boolean',
        description: 'accept unsigned AuthnRequests again from SPs whose metadata does not say they sign them',
      },
    },
    async run(ctx, v, [id]) {
      const on = v['require-signed-requests'] === true;
      const off = v['no-require-signed-requests'] === true;
      if (on && off) throw badRequest('give --require-signed-requests or --no-require-signed-requests, not both');
      const view = await updateFederation(
        ctx.store,
        intOption(id, 'id'),
        on || off ? { requireSignedRequests: on } : {},
        by(ctx),
      );
      return ctx.json ? view : viewText(view);
    },
  },
  {
    group: 'saml',
    name: 'federation refresh',
    summary: 'fetch and verify the aggregate now (the service also does on its schedule)',
    args: [{ name: 'id', description: 'the federation id' }],
    options: {},
    async run(ctx, _v, [id]) {
      const federationId = intOption(id, 'id');
      const outcome = await refreshFederation(ctx.store, federationSettings(ctx.config), federationId, {
        ...by(ctx),
        force: true,
      });
      if (outcome.outcome === 'failed') ctx.exitCode = 1;
      if (ctx.json) return outcome;
      switch (outcome.outcome) {
        case 'updated':
          return `federation ${federationId}: ${outcome.entities} service providers, valid until ${outcome.valid_until}${outcome.upstream_providers > 0 ? `; ${outcome.upstream_providers} upstream provider(s) changed` : ''}`;
        case 'unchanged':
          return `federation ${federationId}: unchanged since the last fetch (valid until ${outcome.valid_until ?? '-'})`;
        case 'busy':
          return `federation ${federationId}: another refresh is under way`;
        default:
          return `federation ${federationId}: refresh failed (${outcome.error}); it is ${outcome.state}`;
      }
    },
  },
  {
    group: 'saml',
    name: 'federation remove',
    summary:
      'stop trusting a federation: its service providers can no longer sign in (refused while upstream providers are bound to it)',
    args: [{ name: 'id', description: 'the federation id' }],
    options: {},
    async run(ctx, _v, [id]) {
      const federationId = intOption(id, 'id');
      await removeFederation(ctx.store, federationId, by(ctx));
      return ctx.json ? { id: federationId, removed: true } : `removed federation ${federationId}`;
    },
  },
];
