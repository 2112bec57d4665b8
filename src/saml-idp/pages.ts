// The pages SAML single sign-on shows: the refusal page (the organization's look, the request id
// for the helpdesk, never a stack trace) and the HTTP-POST binding's form that carries a message to
// the SP, submitted by a script of our own and by a button without one.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { frameFor } from '../ui/frame.ts';
import { html } from '../ui/html.ts';
import { pageHeaders, originOf } from '../ui/html.ts';
import { layout, messagePage } from '../ui/layout.ts';

export const POST_SCRIPT_PATH = '/saml2/idp/post.js';
export const POST_SCRIPT = "document.getElementById('saml-post').submit();\n";

/** The refusal page: what happened, what to do, and the request id. */
export function sendRefusal(request: FastifyRequest, reply: FastifyReply, status: number) {
  const frame = frameFor(request);
  const page = messagePage(frame, {
    title: frame.t('saml.refused_title'),
    message: frame.t('saml.refused'),
    advice: frame.t('saml.refused_advice'),
    reference: request.id,
  });
  return reply.code(status).headers(pageHeaders()).send(page);
}

/**
 * The HTTP-POST binding: a form to the SP's verified endpoint with the message (base64) and the
 * RelayState, submitted at once. The page's policy lets forms go to that origin only.
 */
export function sendPostForm(
  request: FastifyRequest,
  reply: FastifyReply,
  to: { url: string; parameter: 'SAMLResponse' | 'SAMLRequest'; message: string; relayState?: string },
  title: 'saml.sending' | 'saml.signing_out' = 'saml.sending',
) {
  const frame = frameFor(request);
  const body = html`<h1>${frame.t(title)}</h1>
<form id="saml-post" method="post" action="${to.url}">
<input type="hidden" name="${to.parameter}" value="${to.message}">
${to.relayState === undefined ? html`` : html`<input type="hidden" name="RelayState" value="${to.relayState}">`}
<button type="submit" class="primary">${frame.t('saml.continue')}</button>
</form>`;
  const page = layout(frame, frame.t(title), body, [POST_SCRIPT_PATH]);
  const origin = originOf(to.url);
  return reply
    .code(200)
    .headers(pageHeaders({ formTargets: origin ? [origin] : [] }))
    .send(page);
}

/** Seconds the signed-out page's iframes get before the browser moves on. */
const CONTINUE_AFTER = 2;

/**
 * The signed-out page of a SAML logout whose session had OpenID Connect clients with a
 * front-channel logout URI: hidden iframes to them (framing allowed for exactly their origins),
 * then on to `next` (the logout's next step, on this service) by a refresh, not a script.
 */
export function sendFrontchannelFrames(request: FastifyRequest, reply: FastifyReply, frames: string[], next: string) {
  const frame = frameFor(request);
  const body = html`<h1>${frame.t('logout.done_title')}</h1>
<p class="message">${frame.t('logout.done')}</p>
${frames.map((src) => html`<iframe src="${src}" hidden title="" width="0" height="0" class="frontchannel-logout"></iframe>`)}
<p><a href="${next}" id="logout-continue">${frame.t('logout.continue')}</a></p>`;
  const frameTargets = frames.map(originOf).filter((o): o is string => o !== undefined);
  return reply
    .code(200)
    .headers(pageHeaders({ frameTargets }))
    .header('refresh', `${CONTINUE_AFTER};url=${next}`)
    .send(layout(frame, frame.t('logout.done_title'), body));
}
