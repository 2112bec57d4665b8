// The Fastify constant-JSON floor, run as its own process (like the service) so that it does not
// share an event loop with the load generator. Prints its port on stdout.
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/floor', async () => ({ hello: 'world' }));
await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${(app.server.address() as { port: number }).port}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
