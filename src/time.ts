/** Epoch milliseconds as ISO 8601 in UTC with an explicit offset: 2024-01-15T10:30:00+00:00 */
export function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+00:00');
}
