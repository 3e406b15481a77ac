import type { Session } from '../app';
import { ErrorBanner, href, Scroll, useLoad } from '../ui';

export function OverviewPage({ session }: { session: Session }) {
  const { data, error, loading } = useLoad(() => session.api.overview(), [session]);
  const max = Math.max(1, ...(data?.traffic ?? []).map((minute) => minute.envelopes));
  const total = (data?.traffic ?? []).reduce((sum, minute) => sum + minute.envelopes, 0);
  return (
    <>
      <h1>Overview</h1>
      <ErrorBanner error={error} />
      {loading && !data && <p class="loading">Loading…</p>}
      {data && (
        <div class="cards">
          {data.dependencies && (
            <section aria-labelledby="deps">
              <h2 id="deps">Dependencies</h2>
              {data.embedded && <p class="hint">Embedded: PGlite and the in-process bus, no Redis.</p>}
              <ul class="plain">
                {Object.entries(data.dependencies).map(([name, up]) => (
                  <li key={name}>
                    <span class={up ? 'ok' : 'bad'}>{up ? 'up' : 'down'}</span> {name}
                  </li>
                ))}
              </ul>
            </section>
          )}
          <section aria-labelledby="traffic">
            <h2 id="traffic">Traffic, last hour</h2>
            <p>
              <strong>{total}</strong> envelopes
            </p>
            <div class="spark" role="img" aria-label={`Envelopes per minute over the last hour, peak ${max === 1 && total === 0 ? 0 : max}`}>
              {data.traffic.map((minute) => (
                <span key={minute.minute} class="bar" data-level={Math.ceil((minute.envelopes / max) * 8)} title={`${minute.minute}: ${minute.envelopes}`} />
              ))}
            </div>
          </section>
          {data.backlogs && (
            <section aria-labelledby="backlogs" class="wide">
              <h2 id="backlogs">Backlogs</h2>
              {data.backlogs.streams.length === 0 && <p>No frame streams.</p>}
              {data.backlogs.streams.length > 0 && (
              <Scroll label="Stream backlogs">
                <table>
                  <caption>Streams</caption>
                  <thead>
                    <tr>
                      <th scope="col">Partition</th>
                      <th scope="col">Length</th>
                      <th scope="col">Lag</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.backlogs.streams.map((stream) => (
                      <tr key={stream.partition}>
                        <td>{stream.partition}</td>
                        <td>{stream.length}</td>
                        <td>{stream.lag}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Scroll>
              )}
              {data.backlogs.queues.length === 0 && <p>No job queues.</p>}
              {data.backlogs.queues.length > 0 && (
              <Scroll label="Queue backlogs">
                <table>
                  <caption>Queues</caption>
                  <thead>
                    <tr>
                      <th scope="col">Queue</th>
                      <th scope="col">Waiting</th>
                      <th scope="col">Delayed</th>
                      <th scope="col">Failed</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.backlogs.queues.map((queue) => (
                      <tr key={queue.queue}>
                        <td>{queue.queue}</td>
                        <td>{queue.waiting}</td>
                        <td>{queue.delayed}</td>
                        <td>{queue.failed}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Scroll>
              )}
            </section>
          )}
          <section aria-labelledby="largest">
            <h2 id="largest">Largest mailboxes</h2>
            {data.largest_mailboxes.length === 0 ? (
              <p>No unread mail.</p>
            ) : (
              <ol>
                {data.largest_mailboxes.map((box) => (
                  <li key={box.handle}>
                    <a href={href('agents', box.handle)}>{box.handle}</a> — {box.unread} unread
                  </li>
                ))}
              </ol>
            )}
          </section>
        </div>
      )}
    </>
  );
}
