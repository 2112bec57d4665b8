// The profile photo on /account: a section of the account page, and POST /account/photo to
// upload (multipart/form-data, no script needed) or remove it. The account feature provides the
// session and the CSRF check.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import { bytes as asBuffer } from '../store/index.ts';
import { findPhoto } from '../store/photos.ts';
import { html, type Account, type AccountView, type Html } from '../web/index.ts';
import { AppError } from '../errors.ts';
import { rateLimit } from '../http/rate-limit.ts';
import { PHOTO_EDGE, PHOTO_LIMITS, removePhotoByEppn, setPhoto } from './photos.ts';
import { hiddenSchema } from './schemas.ts';

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
const CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async function photoSection(store: Store, view: AccountView, remember: (field: string) => void): Promise<Html> {
  remember(view.csrf.field);
  const photo = view.user.photo_handle ? await findPhoto(store.db, view.user.photo_handle) : undefined;
  const csrf = html`<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">`;
  return html`<section aria-labelledby="photo-heading" id="photo">
<h2 id="photo-heading">Profile photo</h2>
${
  photo
    ? html`<p><img src="data:image/jpeg;base64,${asBuffer(photo.bytes).toString('base64')}" width="${photo.width}" height="${photo.height}" alt="Your profile photo"></p>`
    : html`<p>You have no profile photo.</p>`
}
<p>Applications you allow to see your photo get it as a JPEG of ${PHOTO_EDGE} pixels on the longest edge. JPEG, PNG, WebP, GIF or AVIF, at most ${PHOTO_LIMITS.maxBytes / 1024 / 1024} MiB and ${PHOTO_LIMITS.maxPixels / 1_000_000} megapixels.</p>
<form method="post" action="${ACCOUNT_PHOTO_PATH}" enctype="multipart/form-data">
${csrf}
<label for="photo-file">Image</label>
<input id="photo-file" type="file" name="photo" accept="${ACCEPT}" required>
<button type="submit" name="action" value="upload">${photo ? 'Replace photo' : 'Upload photo'}</button>
</form>
${
  photo
    ? html`<form method="post" action="${ACCOUNT_PHOTO_PATH}" enctype="multipart/form-data">
${csrf}
<button type="submit" name="action" value="remove">Remove photo</button>
</form>`
    : ''
}
</section>`;
}

function sendProblem(reply: FastifyReply, status: number, message: string, headers: Record<string, string> = {}) {
  const page = html`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Profile photo</title><link rel="stylesheet" href="/static/style.css"></head>
<body><main class="card"><h1>Profile photo</h1><p class="message">${message}</p><p><a href="/account#photo">Back to your account</a></p></main></body></html>`;
  return reply.code(status).headers(headers).header('content-security-policy', CSP).type('text/html; charset=utf-8').send(page.__html);
}

export function accountPhotoPlugin({ store, account }: AccountPhotoDeps) {
  // The account feature names its CSRF form field; the section learns it when it renders.
  let csrfField = '_csrf';
  account.addSection({ render: (view) => photoSection(store, view, (field) => (csrfField = field)) });
  const uploads = rateLimit(store, 'account-photo', UPLOADS_PER_HOUR, 60 * 60 * 1000);

  const readForm = async (request: FastifyRequest): Promise<FormData | undefined> => {
    try {
      return await new Response(new Uint8Array(request.body as Buffer), { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
    } catch {
      return undefined;
    }
  };

  return async function accountPhoto(app: FastifyInstance) {
    app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, body, done) => done(null, body));

    app.post(ACCOUNT_PHOTO_PATH, { schema: hiddenSchema }, async (request, reply) => {
      const user = await account.currentUser(request, reply);
      if (!user) return reply.code(303).header('location', '/account').send();
      const form = await readForm(request);
      if (!form) return sendProblem(reply, 400, 'The upload could not be read; send the form again.');
      if (!(await account.verifyCsrf(request, reply, form.get(csrfField)))) return sendProblem(reply, 403, 'The form has expired; reload your account page and try again.');

      if (form.get('action') === 'remove') {
        await removePhotoByEppn(store, user.eppn);
        return reply.code(303).header('location', '/account#photo').send();
      }
      const file = form.get('photo');
      if (!(file instanceof Blob) || file.size === 0) return sendProblem(reply, 400, 'Choose an image file to upload.');
      try {
        await uploads.consume(String(user.id));
        await setPhoto(store, user, Buffer.from(await file.arrayBuffer()));
      } catch (err) {
        if (err instanceof AppError && err.status === 429) return sendProblem(reply, 429, 'Too many photo uploads; try again later.', err.headers);
        if (err instanceof AppError && err.status === 400) return sendProblem(reply, 400, err.message);
        throw err;
      }
      return reply.code(303).header('location', '/account#photo').send();
    });
  };
}
