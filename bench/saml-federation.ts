// npm run bench -- saml-federation [--entities 5000]
// Verifying a federation's metadata aggregate (docs/saml.md, Joining a federation): a synthetic
// aggregate of N SPs (each with a certificate and the R&S entity category), signed by a test
// federation key, verified as the service verifies one: the root's signature alone, the whole
// verification with every member read in-process, and the same in the child process the service
// uses for aggregates above 2 MB. Prints the times, the size and the heap used.
import { generateKeyPairSync } from 'node:crypto';
import { createSelfSignedCertificate } from '../src/saml/xml/index.ts';
import { verifyAggregate, verifySignedMetadata } from '../src/saml/metadata/index.ts';
import { verifyAggregateIsolated } from '../src/service-providers/aggregate-process.ts';
import { signedAggregate, spEntity, RS } from '../test/saml/federation-fixtures.ts';

const ms = (start: number) => `${Math.round(performance.now() - start)} ms`;

export async function main(args: string[]): Promise<void> {
  const at = args.indexOf('--entities');
  const count = at >= 0 ? Number(args[at + 1]) : 5000;
  if (!Number.isInteger(count) || count < 1 || count > 100_000) throw new Error('--entities must be 1-100000');
  const key = (name: string) => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return createSelfSignedCertificate({ privateKey, commonName: name }).then((certificate) => ({
      privateKey,
      certificate,
    }));
  };
  const [federation, sp] = await Promise.all([key('federation'), key('sp')]);
  const entities = Array.from({ length: count }, (_, i) =>
    spEntity({ entityId: `https://sp${i}.example.edu/shibboleth`, categories: [RS], certificate: sp.certificate }),
  );
  const xml = Buffer.from(signedAggregate({ ...federation, privateKeyPem: '' }, { entities }));
  const options = {
    certificates: [federation.certificate],
    maxValidityMs: 14 * 86_400_000,
    maxBytes: 200 * 1024 * 1024,
  };
  console.log(`aggregate: ${count} SPs, ${(xml.byteLength / 1024 / 1024).toFixed(1)} MiB`);
  let start = performance.now();
  verifySignedMetadata(xml, 'EntitiesDescriptor', options);
  console.log(`root signature verified: ${ms(start)}`);
  start = performance.now();
  const aggregate = verifyAggregate(xml, options);
  const heap = Math.round(process.memoryUsage().heapUsed / 1e6);
  console.log(
    `verified and ${aggregate.entities.length} members read, in-process: ${ms(start)} (heap used ${heap} MB)`,
  );
  start = performance.now();
  const isolated = await verifyAggregateIsolated(xml, options, 0);
  console.log(`the same in a child process: ${ms(start)} (${isolated.entities.length} members)`);
}
