/** Epoch milliseconds as ISO 8601 in UTC with an explicit offset: 2024-01-15T10:30:00+00:00 */
export function iso(ms: number): string {
  const s = new Date(ms).toISOString();
  // YYYY-MM-DDTHH:mm:ss.sssZ; years outside 0-9999 have a longer form
  return s.length === 24 ? `${s.slice(0, 19)}+00:00` : s.replace(/\.\d{3}Z$/, '+00:00');
}
