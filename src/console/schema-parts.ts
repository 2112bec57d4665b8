// What the staff API's schemas share: the error body and its documented responses.

export const errorBody = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: { type: 'integer', description: 'The HTTP status' }, message: { type: 'string' } },
} as const;

/** One documented error response per status, its example message the meaning's first clause. */
export const errorResponses = (meaning: Record<number, string>) =>
  Object.fromEntries(
    Object.entries(meaning).map(([s, description]) => [
      s,
      { ...errorBody, description, examples: [{ code: Number(s), message: description.split(';')[0] }] },
    ]),
  );

/** The organization id in the path; anything but digits names no organization (404). */
export const orgIdParams = {
  type: 'object',
  required: ['org_id'],
  properties: { org_id: { type: 'string', pattern: '^[0-9]+$', examples: ['1234'] } },
} as const;
