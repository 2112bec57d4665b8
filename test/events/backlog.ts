// A backlog for the delivery tests: `users` users of organization 1 with two events each
// (user.step1, then user.step2), all at one instant, to be written at once with insertEvents.
import type { NewEvent } from '../../src/store/events.ts';

export function twoStepBacklog(prefix: string, users: number, at = Date.now()): NewEvent[] {
  return [1, 2].flatMap((step) =>
    Array.from({ length: users }, (_, i) => ({
      at,
      type: `user.step${step}`,
      orgId: 1,
      subject: `${prefix}${i}@example.org`,
      sub: null,
      ssfType: null,
      data: { eppn: `${prefix}${i}@example.org`, org_id: 1, step },
    })),
  );
}
