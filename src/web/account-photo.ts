// The profile photo on /account: a section of the account page, and POST /account/photo to
// upload (multipart/form-data, no script needed) or remove it. The account page provides the
// session, the CSRF check, the texts (its catalog, in the page's language) and the error pages.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import { bytes as asBuffer } from '../store/index.ts';
import { findPhoto } from '../store/photos.ts';
import { AppError } from '../errors.ts';
import { rateLimit } from '../http/rate-limit.ts';
import { PHOTO_EDGE, PHOTO_LIMITS, removePhotoByEppn, setPhoto } from '../directory/photos.ts';
import { html, type Html } from './html.ts';
import type { Account, AccountView } from './account-page.ts';

export interface AccountPhotoDeps {
  store: Store;
  account: Account;
}

export const ACCOUNT_PHOTO_PATH = '/account/photo';
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

async function photoSection(store: Store, view: AccountView, remember: (field: string) => void): Promise<Html> {
  remember(view.csrf.field);
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

export function accountPhotoPlugin({ store, account }: AccountPhotoDeps) {
  // The account feature names its CSRF form field; the section learns it when it renders.
  let csrfField = '_csrf';
  account.addSection({ render: (view) => photoSection(store, view, (field) => (csrfField = field)) });
  const uploads = rateLimit(store, 'account-photo', UPLOADS_PER_HOUR, 60 * 60 * 1000);

  const readForm = async (request: FastifyRequest): Promise<FormData | undefined> => {
    try {
      return await new Response(new Uint8Array(request.body as Buffer), {
        headers: { 'content-type': String(request.headers['content-type']) },
      }).formData();
    } catch {
      return undefined;
    }
  };

  return async function accountPhoto(app: FastifyInstance) {
    app.addContentTypeParser(
      'multipart/form-data',
      { parseAs: 'buffer', bodyLimit: BODY_LIMIT },
      (_request, body, done) => done(null, body),
    );

    app.post(ACCOUNT_PHOTO_PATH, { schema: { hide: true } }, async (request, reply) => {
      const user = await account.currentUser(request, reply);
      if (!user) return reply.code(303).header('location', '/account').send();
      const form = await readForm(request);
      if (!form) return account.sendMessage(request, reply, 400, 'photo.unreadable');
      if (!(await account.verifyCsrf(request, reply, form.get(csrfField))))
        return account.sendMessage(request, reply, 403, 'error.csrf');

      if (form.get('action') === 'remove') {
        await removePhotoByEppn(store, user.eppn);
        return reply.code(303).header('location', '/account#photo').send();
      }
      const file = form.get('photo');
      if (!(file instanceof Blob) || file.size === 0) return account.sendMessage(request, reply, 400, 'photo.choose');
      try {
        await uploads.consume(String(user.id));
        await setPhoto(store, user, Buffer.from(await file.arrayBuffer()));
      } catch (err) {
        if (err instanceof AppError && err.status === 429)
          return account.sendMessage(request, reply, 429, 'photo.rate_limited', { headers: err.headers });
        // What was wrong with the image (size, format, pixels) is in the log; the page names the rules.
        if (err instanceof AppError && err.status === 400) {
          request.log.info({ event: 'photo.refused', reason: err.message }, 'photo upload refused');
          return account.sendMessage(request, reply, 400, 'photo.bad_image', { vars: LIMIT_VARS });
        }
        throw err;
      }
      return reply.code(303).header('location', '/account#photo').send();
    });
  };
}
