// The child process of aggregate-process.ts: receives one aggregate and the trust options, answers
// with the verified aggregate or the refusal, and exits.
import { AppError } from '../errors.ts';
import { verifyAggregate } from '../saml/metadata/index.ts';
import type { ChildAnswer, ChildRequest } from './aggregate-process.ts';

function answer(message: ChildAnswer): void {
  process.send!(message, () => process.exit(0));
}

process.once('message', (message) => {
  const { body, options } = message as ChildRequest;
  try {
    answer({
      ok: true,
      aggregate: verifyAggregate(Buffer.from(body.buffer, body.byteOffset, body.byteLength), options),
    });
  } catch (err) {
    if (err instanceof AppError) {
      const reason = (err as { reason?: string }).reason;
      answer({ ok: false, status: err.status, message: err.message, ...(reason ? { reason } : {}) });
    } else {
      answer({ ok: false, status: 502, message: 'the aggregate could not be verified' });
    }
  }
});
