// Values bound into one statement are parameters, and both databases cap them per statement
// (SQLite at 32,766, PostgreSQL at 65,535): a list that comes from input (the ids of an `in (...)`
// list, the rows of one insert) goes to the database in chunks of a size far below either cap.
export const CHUNK = 1000;

/** The values in order, in slices of at most `size`. */
export function chunks<T>(values: readonly T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < values.length; i += size) out.push(values.slice(i, i + size));
  return out;
}
