// The profile photo on /account: a section of the account page, and POST /account/photo to
// upload (multipart/form-data, no script needed) or remove it. The route takes the account
// page's own steps: signed in, then this session's CSRF token, from one read of the session.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import { bytes as asBuffer } from '../store/index.ts';
import { findPhoto } from '../store/photos.ts';
import { AppError } from '../errors.ts';
import { rateLimit } from '../http/rate-limit.ts';
import { PHOTO_EDGE, PHOTO_LIMITS, removePhoto, setPhoto } from '../directory/photos.ts';
import { userActor } from '../audit/index.ts';
import { html, type Html } from '../ui/html.ts';
import { frameFor, sendMessage, type Kit } from './kit.ts';
import { checkSessionCsrf, redirect, requireSignedIn, type AccountSection, type AccountView } from './account-page.ts';

const ACCOUNT_PHOTO_PATH = '/account/photo';
const ACCEPT = 'image/jpeg,image/png,image/webp,image/gif,image/avif';
// The image plus the form's other fields and multipart framing.
const BODY_LIMIT = PHOTO_LIMITS.maxBytes + 64 * 1024;
// Decoding a large image costs up to a second of CPU: a signed-in user gets this many per hour.
export const UPLOADS_PER_HOUR = 20;
const LIMIT_VARS = {
  edge: String(PHOTO_EDGE),
  mib: String(PHOTO_LIMITS.maxBytes / 1024 / 1024),
  mp: String(PHOTO_LIMITS.maxPixels / 1_000_000),
};

async function photoSection(store: Store, view: AccountView): Promise<Html> {
  const { t } = view;
  const photo = view.user.photo_handle ? await findPhoto(store.db, view.user.photo_handle) : undefined;
  const csrf = html`<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}" />`;
  // Kept as written: Prettier would break the text inside the buttons and the image onto lines of their own.
  // prettier-ignore
  return html`<section aria-labelledby="photo-heading" id="photo">
<h2 id="photo-heading">${t('photo.title')}</h2>
${
  photo
    ? html`<p><img class="photo" src="data:image/jpeg;base64,${asBuffer(photo.bytes).toString('base64')}" width="${photo.width}" height="${photo.height}" alt="${t('photo.alt')}"></p>`
    : html`<p id="no-photo">${t('photo.none')}</p>`
}
<p class="hint" id="photo-hint">${t('photo.intro', LIMIT_VARS)}</p>
<form method="post" action="${ACCOUNT_PHOTO_PATH}" enctype="multipart/form-data" class="photo-upload">
${csrf}
<label for="photo-file">${t('photo.file')}</label>
<input id="photo-file" type="file" name="photo" accept="${ACCEPT}" required aria-describedby="photo-hint">
<button type="submit" name="action" value="upload" class="secondary">${t(photo ? 'photo.replace' : 'photo.upload')}</button>
</form>
${
  photo
    ? html`<form method="post" action="${ACCOUNT_PHOTO_PATH}" enctype="multipart/form-data" class="photo-remove">
${csrf}
<button type="submit" name="action" value="remove" class="danger">${t('photo.remove')}</button>
</form>`
    : ''
}
</section>`;
}

const readForm = async (request: FastifyRequest): Promise<FormData | undefined> => {
  try {
    return await new Response(new Uint8Array(request.body as Buffer), {
      headers: { 'content-type': String(request.headers['content-type']) },
    }).formData();
  } catch {
    return undefined;
  }
};

/** The photo section for the account page, and the plugin with its upload route. */
export function accountPhoto(kit: Kit): { section: AccountSection; plugin: (app: FastifyInstance) => Promise<void> } {
  const { store } = kit;
  const uploads = rateLimit(store, 'account-photo', UPLOADS_PER_HOUR, 60 * 60 * 1000);
  const section: AccountSection = { render: (view) => photoSection(store, view) };

  const plugin = async function accountPhotoRoutes(app: FastifyInstance) {
    app.addContentTypeParser(
      'multipart/form-data',
      { parseAs: 'buffer', bodyLimit: BODY_LIMIT },
      (_request, body, done) => done(null, body),
    );

    app.post(ACCOUNT_PHOTO_PATH, { schema: { hide: true } }, async (request, reply) => {
      const frame = frameFor(request);
      const who = await requireSignedIn(kit, request, reply);
      if (!who) return reply;
      const form = await readForm(request);
      if (!form) return sendMessage(reply, frame, 400, 'photo.unreadable');
      if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: form.get(kit.csrf.field) })) return reply;

      if (form.get('action') === 'remove') {
        await removePhoto(store, who.user, { actor: userActor(who.user, request) });
        return redirect(reply, '/account#photo');
      }
      const file = form.get('photo');
      if (!(file instanceof Blob) || file.size === 0) return sendMessage(reply, frame, 400, 'photo.choose');
      try {
        await uploads.consume(String(who.user.id));
        await setPhoto(store, who.user, Buffer.from(await file.arrayBuffer()), { actor: userActor(who.user, request) });
      } catch (err) {
        if (err instanceof AppError && err.status === 429)
          return sendMessage(reply, frame, 429, 'photo.rate_limited', { headers: err.headers });
        // What was wrong with the image (size, format, pixels) is in the log; the page names the rules.
        if (err instanceof AppError && err.status === 400) {
          request.log.info({ event: 'photo.refused', reason: err.message }, 'photo upload refused');
          return sendMessage(reply, frame, 400, 'photo.bad_image', { vars: LIMIT_VARS });
        }
        throw err;
      }
      return redirect(reply, '/account#photo');
    });
  };
  return { section, plugin };
}
