import { textPart } from '#client';
import { RoostContainer, type StartedRoostContainer } from '../../libs/testcontainers/src';
import { connect } from '../support/ws';
import { inspect, testImage } from './image-support';

// RoostContainer (libs/testcontainers): what a user's integration tests start. The embedded operator
// from the image, two agents provisioned, a send and a receive (mailbox and live frame).
describe('RoostContainer', () => {
  let roost: StartedRoostContainer;

  beforeAll(async () => {
    roost = await new RoostContainer(testImage())
      .withAgents({ handle: '@tc.alice', policy: 'open' }, { handle: '@tc.bob', policy: 'open' }, '@tc.carol')
      .start();
  });

  afterAll(async () => {
    await roost?.stop();
  });

  it('provisions the agents and exposes their tokens by canonical handle', async () => {
    expect(roost.getAgents().sort()).toEqual(['@tc.alice', '@tc.bob', '@tc.carol']);
    expect(roost.getAgentToken('@tc.bob')).toEqual(expect.any(String));
    expect(() => roost.getAgentToken('@tc.dave')).toThrow(/no agent @tc.dave/);
    expect((await roost.admin().agents()).map((a) => a.handle).sort()).toEqual(['@tc.alice', '@tc.bob', '@tc.carol']);
  });

  it('runs hardened: read-only root filesystem, uid 1000', async () => {
    expect(await inspect(roost.getId(), '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}')).toBe('true 1000:1000');
  });

  it('one agent sends, the other receives (live frame, mailbox, body)', async () => {
    const socket = await connect(roost.getUrl(), { token: roost.getAgentToken('@tc.bob') });
    try {
      const accepted = await roost
        .client('@tc.alice')
        .send({ to: ['@tc.bob'], subject: 'hi', content_parts: [textPart('hello bob')] });
      await socket.until(() => socket.ids.includes(accepted.id), 10_000, 'the frame');
      expect(roost.getWebSocketUrl()).toBe(`${roost.getUrl().replace('http', 'ws')}/connect`);
      const bob = roost.client('@tc.bob');
      expect((await bob.mailbox({ unread: true })).envelope_headers.map((h) => h.id)).toEqual([accepted.id]);
      expect(await bob.message(accepted.id)).toEqual(
        expect.objectContaining({ from: '@tc.alice', content_parts: [textPart('hello bob')] }),
      );
    } finally {
      socket.close();
    }
  });

  it('refuses withAgents on a role without the admin API', async () => {
    await expect(new RoostContainer(testImage()).withRole('gateway').withAgents('@tc.x').start()).rejects.toThrow(
      /needs the admin API/,
    );
  });
});
