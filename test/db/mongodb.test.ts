import t from 'tap';
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { MongoStore } from '../../src/db/mongodb/store.js';
import { storeContract } from './fixtures/store-contract/harness.js';

const url = process.env.FLEETPLANE_MONGODB_URL;
const database = `fleetplane_contract_${randomBytes(4).toString('hex')}`;

t.test(
  'store contract: MongoDB backend',
  { skip: url ? false : 'FLEETPLANE_MONGODB_URL is not set: no MongoDB server to run the contract against' },
  async (t) => {
    storeContract(t, {
      open: () => MongoStore.connect({ url: url!, database, serverSelectionTimeoutMs: 10_000 }),
      spec: () => ({ backend: 'mongodb', url: url!, database }),
      async dispose() {
        const client = new MongoClient(url!);
        try {
          await client.db(database).dropDatabase();
        } finally {
          await client.close();
        }
      },
    });
  },
);
