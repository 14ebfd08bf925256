// bench/pubsub.sh's health hammer, a worker thread of client.mjs (its own event loop, so the
// 1,000 WebSockets of the main thread do not delay its timestamps): GET /__clank/health one
// after the other on one keep-alive connection until told to stop, each sample written to
// the shared arrays as (start, latency), in ms since the epoch (performance.timeOrigin +
// performance.now(), comparable with the main thread's).
//   workerData: { base, samples: SharedArrayBuffer (Float64 pairs), count: SharedArrayBuffer (Int32 [n, stop]) }
import http from 'node:http';
import { workerData } from 'node:worker_threads';

const { base, samples, count } = workerData;
const pairs = new Float64Array(samples);
const state = new Int32Array(count); // [0]: samples written, [1]: 1 = stop
const capacity = pairs.length / 2;
const url = new URL(base);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const now = () => performance.timeOrigin + performance.now();

function health() {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: '/__clank/health', agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`health answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

while (Atomics.load(state, 1) === 0) {
  const t0 = now();
  await health();
  const n = Atomics.load(state, 0);
  if (n < capacity) {
    pairs[2 * n] = t0;
    pairs[2 * n + 1] = now() - t0;
    Atomics.store(state, 0, n + 1);
  }
}
agent.destroy();
