// An upstream provider's logo as the operator gives it (`upstream add|update --logo`): a file, or an
// https URL fetched once, now, with a time limit and a size cap and no redirect, as `--metadata` is.
// Either way the bytes are checked as an organization's logo is (src/brand.ts: PNG, WebP or SVG by
// content, at most 100 KiB) and stored; the sign-in page shows the copy the service serves itself.
import { BRAND_LIMITS, BrandError, brandLogo, readLogoFile, type Logo } from '../brand.ts';
import { badRequest } from '../errors.ts';
import { isUrlSource, readMetadataSource } from '../service-providers/metadata-source.ts';

const IMAGE_TYPES = 'image/png, image/webp, image/svg+xml;q=0.9';

/** The logo at `source` (a file path, or an https URL), checked; a refusal names --logo and says why. */
export async function readUpstreamLogo(source: string, options: { timeoutMs?: number } = {}): Promise<Logo> {
  try {
    if (!isUrlSource(source)) return readLogoFile(source);
    const data = await readMetadataSource(source, {
      timeoutMs: options.timeoutMs ?? 10_000,
      maxBytes: BRAND_LIMITS.logoBytes,
      option: '--logo',
      accept: IMAGE_TYPES,
    });
    return brandLogo(data);
  } catch (err) {
    if (err instanceof BrandError) throw badRequest(`--logo: ${err.message}`);
    throw err;
  }
}
