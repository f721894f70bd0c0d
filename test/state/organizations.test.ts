import t from 'tap';
import { FakeClock } from '../helpers/fake-clock.js';
import { OrganizationTracker } from '../../src/state/organizations.js';

const GRACE = 60_000;

function tracker() {
  const clock = new FakeClock();
  const events: Array<[string, string, number]> = [];
  const subject = new OrganizationTracker(clock, GRACE, {
    active: (organization) => events.push(['active', organization, clock.now()]),
    inactive: (organization) => events.push(['inactive', organization, clock.now()]),
  });
  return { clock, events, subject };
}

t.test('the last socket closing starts the grace: the organization is inactive exactly when it ends, once', async (t) => {
  const { clock, events, subject } = tracker();
  subject.socketOpened('acme', 1);
  subject.socketOpened('acme', 2);
  t.same(events, [['active', 'acme', 0]], 'active with its first socket, once');
  clock.advance(1_000);
  subject.socketClosed('acme', 1);
  clock.advance(GRACE);
  t.same(subject.active(), ['acme'], 'one socket is still open: no grace');
  subject.socketClosed('acme', 2);
  const closedAt = clock.now();
  clock.advance(GRACE - 1);
  t.same(subject.active(), ['acme'], 'still active 1 ms before the grace ends');
  clock.advance(1);
  t.same(events, [['active', 'acme', 0], ['inactive', 'acme', closedAt + GRACE]], 'inactive at the end of the grace');
  clock.advance(10 * GRACE);
  t.equal(events.length, 2, 'and only once');
  t.equal(clock.pending, 0, 'no timer left');
});

t.test('a socket opening within the grace cancels it; the next close starts a grace of its own', async (t) => {
  const { clock, events, subject } = tracker();
  subject.socketOpened('acme', 1);
  subject.socketClosed('acme', 1);
  clock.advance(GRACE - 1);
  subject.socketOpened('acme', 2);
  clock.advance(10 * GRACE);
  t.same(events, [['active', 'acme', 0]], 'reconnected 1 ms before the end: never inactive');
  t.equal(clock.pending, 0, 'the cancelled grace left no timer');
  subject.socketClosed('acme', 2);
  const closedAt = clock.now();
  clock.advance(GRACE);
  t.same(events.at(-1), ['inactive', 'acme', closedAt + GRACE], 'a full grace after the second close');
  t.equal(events.length, 2);
});

t.test('a worker exiting closes its sockets; organizations with requests only stay active', async (t) => {
  const { clock, events, subject } = tracker();
  subject.socketOpened('acme', 1);
  subject.touch('globex', 1);
  subject.workerGone(1);
  clock.advance(GRACE);
  t.same(events, [['active', 'acme', 0], ['active', 'globex', 0], ['inactive', 'acme', GRACE]]);
  t.same(subject.active(), ['globex']);
  subject.socketClosed('globex', 1);
  t.equal(clock.pending, 0, 'a close without an open starts nothing');
});
