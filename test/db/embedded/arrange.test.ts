import { Query } from 'mingo';
import t from 'tap';
import { arrange } from '../../../src/db/embedded/arrange.js';

type Row = Record<string, unknown>;

/** What the full query language gives for the same sort, limit and projection. */
function byQuery(rows: Row[], sort: Record<string, 1 | -1> | undefined, limit: number, projection: Record<string, 0 | 1 | boolean> | undefined): Row[] {
  let cursor = new Query({}, {}).find<Row>(rows, projection);
  if (sort) cursor = cursor.sort(sort);
  if (limit > 0) cursor = cursor.limit(limit);
  return cursor.all();
}

const values: unknown[] = ['b', 'a', 'B', '', 'é', 'a', '10', '9', 2, 10, -1, 0, 1.5, 2, null, true, false, [1], { x: 1 }, undefined];
const rowsOf = (picks: number[]): Row[] =>
  picks.map((pick, index) => {
    const value = values[pick % values.length];
    const row: Row = { _id: `id${(index * 7) % 5}${index}`, k: 'x' };
    if (value !== undefined) row.v = value;
    row.w = index;
    return row;
  });

const sets: number[][] = [[], [0], [0, 1, 2, 3, 4, 5], [6, 7, 0, 1], [8, 9, 10, 11, 12, 13], [8, 0], [14, 0, 1], [15, 16], [17, 8], [18, 0], [19, 0], [19], [5, 1, 5, 1]];
const sorts: Array<Record<string, 1 | -1> | undefined> = [undefined, { v: 1 }, { v: -1 }, { _id: 1 }, { _id: -1 }, { w: -1 }, { v: 1, w: -1 }, { k: 1 }, { missing: 1 }];
const projections: Array<Record<string, 0 | 1 | boolean> | undefined> = [
  undefined, { v: 1 }, { w: 1, v: 1 }, { v: 1, _id: 0 }, { _id: 1 }, { _id: 0 }, { v: 0 }, { v: 0, _id: 0 }, { v: true }, { missing: 1 }, { w: false, k: 0 }, { _id: 1, v: 1 },
];

t.test('sort, limit and projection give what the full query language gives, in the same order', async (t) => {
  let compared = 0;
  for (const set of sets) {
    for (const sort of sorts) {
      for (const projection of projections) {
        for (const limit of [0, 1, 2]) {
          const expected = byQuery(rowsOf(set), sort, limit, projection);
          const actual = arrange(rowsOf(set), sort, limit, projection);
          // JSON text compares key order too.
          t.equal(JSON.stringify(actual), JSON.stringify(expected), `${JSON.stringify(set)} sort ${JSON.stringify(sort)} limit ${limit} projection ${JSON.stringify(projection)}`);
          compared += 1;
        }
      }
    }
  }
  t.ok(compared > 1000);
});

t.test('projections the query language refuses are still refused', async (t) => {
  t.throws(() => arrange(rowsOf([0, 1]), undefined, 0, { _id: 1, v: 0 }));
});
