// The one typed error of the service. HTTP handlers turn it into the documented response;
// the CLI prints its message as one line on stderr.
export class AppError extends Error {
  readonly status: number;
  /** extra response headers (Allow, WWW-Authenticate, ...) */
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

/** What went wrong, as the text kept beside a failed delivery: the message, at most `max` characters. */
export function errorText(err: unknown, max = 500): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, max);
}

export const badRequest = (message: string) => new AppError(400, message);
export const unauthorized = (message = 'Token missing or invalid') => new AppError(401, message);
export const forbidden = (message: string) => new AppError(403, message);
export const notFound = (message: string) => new AppError(404, message);
export const conflict = (message: string) => new AppError(409, message);
export const tooManyRequests = (message: string, retryAfterSeconds: number) =>
  new AppError(429, message, { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) });
