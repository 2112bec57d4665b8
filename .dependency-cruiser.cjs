// The layers of docs/architecture.md, enforced. From the bottom up:
//   store < shared < domain < oauth < features < composition (app, main, cli)
// A module may import its own layer or a lower one; a feature never imports another feature;
// SQL and the database drivers stay in store/.
const STORE = '^src/store/';
const SHARED =
  '^src/(config|errors|time|crypto|brand|authenticators)\\.ts$|^src/(vocabulary|http|ui|saml/xml|saml/metadata)/';
const DOMAIN = '^src/(directory|clients|webauthn|audit|service-providers|upstream)/';
const OAUTH = '^src/oauth/';
const FEATURES = '^src/(passkey-admin|userinfo|checkuser|web|console|scim|events|saml-idp|ldap)/';
const COMPOSITION = '^src/(app|main|command-line|cluster)\\.ts$|^src/cli/';

const above = (name, from, higher) => ({
  name,
  severity: 'error',
  comment: `${name}: imports must point down the layers (docs/architecture.md)`,
  from: { path: from },
  to: { path: higher.join('|') },
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'no import cycles', from: {}, to: { circular: true } },
    above('store-imports-upward', STORE, [SHARED, DOMAIN, OAUTH, FEATURES, COMPOSITION]),
    above('shared-imports-upward', SHARED, [DOMAIN, OAUTH, FEATURES, COMPOSITION]),
    above('domain-imports-upward', DOMAIN, [OAUTH, FEATURES, COMPOSITION]),
    above('oauth-imports-upward', OAUTH, [FEATURES, COMPOSITION]),
    above('feature-imports-composition', FEATURES, [COMPOSITION]),
    {
      name: 'feature-imports-feature',
      severity: 'error',
      comment: 'features never import each other; what two features need moves down a layer',
      from: { path: '^src/(passkey-admin|userinfo|checkuser|web|console|scim|events|saml-idp|ldap)/' },
      to: {
        path: '^src/(passkey-admin|userinfo|checkuser|web|console|scim|events|saml-idp|ldap)/',
        pathNot: '^src/$1/',
      },
    },
    {
      name: 'database-outside-store',
      severity: 'error',
      comment: 'SQL and the database drivers live in src/store/ only',
      from: { path: '^src/', pathNot: STORE },
      to: { path: '(^|/)node_modules/(kysely|pg|pg-[a-z-]+)/|^(node:)?sqlite$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'unresolvable',
      severity: 'error',
      comment: 'every import resolves',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
    builtInModules: { add: ['node:sqlite', 'sqlite'] },
  },
};
