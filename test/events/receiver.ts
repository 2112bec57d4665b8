// A real event receiver for the tests: a listening HTTP server that records every request and
// answers what the test says (by default 200 for webhooks, 202 for SETs).
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** the status of the next answer (default: 200) */
  answer: (request: Received) => number | Promise<number>;
  close(): Promise<void>;
  /** resolves once `count` requests satisfying `filter` have arrived (or rejects after `ms`) */
  waitFor(count: number, filter?: (r: Received) => boolean, ms?: number): Promise<Received[]>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const receiver = { received, answer: () => 200 } as unknown as Receiver;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      Promise.resolve(receiver.answer(request)).then((status) => {
        if (status >= 200 && status < 300) received.push(request);
        res.writeHead(status).end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  receiver.waitFor = async (count, filter = () => true, ms = 15_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const matching = received.filter(filter);
      if (matching.length >= count) return matching;
      if (Date.now() > deadline) throw new Error(`expected ${count} deliveries, got ${matching.length} after ${ms} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return receiver;
}
