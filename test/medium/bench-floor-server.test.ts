import pg from 'pg';
import { startFloorServer, type FloorServer } from '../../bench/floor-server';
import { HttpConnection } from '../../bench/support';
import type { ScratchDatabase } from '../../bench/database';
import { createTestDatabase } from '../support/database';

/** `accept-floor`'s bare server: what it answers, and that with a database it answers after the rows are there. */
describe('bench floor server', () => {
  const post = (floor: FloorServer, body: string) =>
    new HttpConnection(`http://127.0.0.1:${floor.port}`).request('POST', '/messages', 'floor', body);
  const envelope = (id: string) =>
    JSON.stringify({ id, to: ['@bench.inbox'], content_parts: [{ type: 'text', text: id }] });

  it('without a database answers 202 with the posted id at once, 400 to a body that is not JSON, 200 to a probe', async () => {
    const floor = await startFloorServer();
    try {
      expect((await fetch(`http://127.0.0.1:${floor.port}/healthz`)).status).toBe(200);
      const reply = await post(floor, envelope('01HZFLOOR0000000000000000A'));
      expect(reply.status).toBe(202);
      expect(JSON.parse(reply.text)).toMatchObject({ id: '01HZFLOOR0000000000000000A' });
      expect((await post(floor, '{not json')).status).toBe(400);
    } finally {
      await floor.close();
    }
  });

  describe('with a database', () => {
    let database: ScratchDatabase;
    let client: pg.Client;
    beforeAll(async () => {
      database = await createTestDatabase('roost_floor');
      client = new pg.Client({ connectionString: database.url });
      await client.connect();
    });
    afterAll(async () => {
      await client.end();
      await database.drop();
    });

    it("answers 202 to concurrent posts once each one's envelope row and mailbox row are committed", async () => {
      const floor = await startFloorServer({ databaseUrl: database.url, maxInFlight: 2 });
      try {
        const ids = Array.from({ length: 40 }, (_, i) => `01HZFLOOR${String(i).padStart(17, '0')}`);
        const replies = await Promise.all(ids.map((id) => post(floor, envelope(id))));
        expect(replies.map((r) => r.status)).toEqual(ids.map(() => 202));
        const envelopes = await client.query<{ id: string; body: string }>(
          'select id, body from floor_envelopes order by id',
        );
        expect(envelopes.rows).toEqual(ids.map((id) => ({ id, body: envelope(id) })));
        const entries = await client.query<{ envelope_id: string }>(
          'select envelope_id from floor_mailbox where mailbox = 1 order by envelope_id',
        );
        expect(entries.rows.map((r) => r.envelope_id)).toEqual(ids);
      } finally {
        await floor.close();
      }
    });

    it('answers 503 when the write fails, and changes nothing', async () => {
      const floor = await startFloorServer({ databaseUrl: database.url });
      try {
        await client.query("insert into floor_envelopes (id, body) values ('01HZFLOORDUP0000000000000A', '{}')");
        const reply = await post(floor, envelope('01HZFLOORDUP0000000000000A'));
        expect(reply.status).toBe(503);
        const rows = await client.query("select body from floor_envelopes where id = '01HZFLOORDUP0000000000000A'");
        expect(rows.rows).toEqual([{ body: '{}' }]);
        const entries = await client.query(
          "select 1 from floor_mailbox where envelope_id = '01HZFLOORDUP0000000000000A'",
        );
        expect(entries.rowCount).toBe(0);
      } finally {
        await floor.close();
      }
    });
  });
});
