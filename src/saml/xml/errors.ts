// What the XML security layer throws. Every refusal is a 400 with a short reason that never echoes
// the input (the protocol features above turn it into their error page with the request id).
import { AppError } from '../../errors.ts';

export type XmlRefusal =
  | 'too-large'
  | 'bad-encoding'
  | 'not-well-formed'
  | 'forbidden-construct'
  | 'schema-invalid'
  | 'signature-missing'
  | 'signature-shape'
  | 'signature-algorithm'
  | 'signature-invalid'
  | 'decryption-failed'
  | 'encryption-algorithm';

export class XmlSecurityError extends AppError {
  readonly reason: XmlRefusal;
  /** for the log only: what the underlying library said (may quote the input) */
  readonly detail: string | undefined;
  constructor(reason: XmlRefusal, message: string, detail?: string) {
    super(400, message);
    this.reason = reason;
    this.detail = detail;
  }
}

export const refuse = (reason: XmlRefusal, message: string, detail?: string): XmlSecurityError =>
  new XmlSecurityError(reason, message, detail);
