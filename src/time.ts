const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: from there on years have more than four digits */
const YEAR_10000_MS = 253_402_300_800_000;

const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);

/** What Date gives, with the offset spelled out (any time, including years outside 1970-9999). */
function isoFromDate(ms: number): string {
  const s = new Date(ms).toISOString();
  // YYYY-MM-DDTHH:mm:ss.sssZ; years outside 0-9999 have a longer form
  return s.length === 24 ? `${s.slice(0, 19)}+00:00` : s.replace(/\.\d{3}Z$/, '+00:00');
}

/**
 * Epoch milliseconds as ISO 8601 in UTC with an explicit offset: 2024-01-15T10:30:00+00:00.
 * Every passkey in a list has two of these; for whole milliseconds from 1970 to 9999 the date is
 * computed here (a third of the time Date takes), anything else goes through Date.
 */
export function iso(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= YEAR_10000_MS) return isoFromDate(ms);
  const days = Math.floor(ms / DAY_MS);
  const seconds = Math.floor((ms - days * DAY_MS) / 1000);
  // the civil date of a day count since 1970-01-01 (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms")
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const m = Math.floor((5 * dayOfYear + 2) / 153); // months from March
  const month = m < 10 ? m + 3 : m - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const day = dayOfYear - Math.floor((153 * m + 2) / 5) + 1;
  const time = `${pad2(Math.floor(seconds / 3600))}:${pad2(Math.floor(seconds / 60) % 60)}:${pad2(seconds % 60)}`;
  return `${String(year).padStart(4, '0')}-${pad2(month)}-${pad2(day)}T${time}+00:00`;
}
