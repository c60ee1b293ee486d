// node-redlock (npm `redlock` with `ioredis`) on one redis-server: the uncontended
// lock+release cycle and the handoff latency from a release to the next waiter's
// acquisition, measured the way dlock_bench_single and dlock_bench_handoff measure dlock.
//
//   node node_redlock.js --port P [--settings default|fast] [--cycles N] [--rounds N]
//
// default: the library's documented defaults (retryCount 10, retryDelay 200 ms,
//          retryJitter 200 ms in the README; 100 ms in the code).
// fast:    a waiter polls every 10 ms without jitter (retryDelay 10, retryJitter 0,
//          retryCount -1), the shortest interval that is still reasonable: below it the
//          polling of each waiter becomes a load of its own on the server.
// Last line: RESULT peer name=node-redlock settings=.. cycle_us=.. cycles_per_s=..
//            handoff_median_us=.. handoff_p99_us=..
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');

function arg(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}
const port = Number(arg('--port', '6379'));
const settings = arg('--settings', 'default');
const cycles = Number(arg('--cycles', '5000'));
const rounds = Number(arg('--rounds', '30'));
if (!Number.isInteger(port) || port <= 0 || !['default', 'fast'].includes(settings)) {
  console.error('node_redlock.js: --port must be a port number and --settings default or fast');
  process.exit(2);
}
const options = settings === 'fast' ? { retryDelay: 10, retryJitter: 0, retryCount: -1 } : {};

const nowUs = () => Number(process.hrtime.bigint()) / 1000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];

async function main() {
  const connect = () => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, connectTimeout: 2000 });
  const holderRedis = connect();
  const waiterRedis = connect();
  const holder = new Redlock([holderRedis], options);
  const waiter = new Redlock([waiterRedis], options);

  // Cycle: lock + unlock, one after the other, on one key.
  for (let i = 0; i < 200; i++) await (await holder.lock('peer:node:cycle', 30000)).unlock();
  const started = nowUs();
  for (let i = 0; i < cycles; i++) await (await holder.lock('peer:node:cycle', 30000)).unlock();
  const cycleUs = (nowUs() - started) / cycles;

  // Handoff: the waiter starts while the key is held; 3 ms later the holder releases.
  const samples = [];
  for (let i = 0; i < rounds; i++) {
    const held = await holder.lock('peer:node:handoff', 30000);
    let acquiredAt = 0;
    const next = waiter.lock('peer:node:handoff', 30000).then((lock) => {
      acquiredAt = nowUs();
      return lock;
    });
    await sleep(3);
    const releasedAt = nowUs();
    await held.unlock();
    const lock = await next;
    samples.push(acquiredAt - releasedAt);
    await lock.unlock();
  }
  samples.sort((a, b) => a - b);
  console.log(`node-redlock (${settings}): cycle ${cycleUs.toFixed(1)} us, handoff median ` +
              `${quantile(samples, 0.5).toFixed(0)} us, p99 ${quantile(samples, 0.99).toFixed(0)} us`);
  console.log(`RESULT peer name=node-redlock settings=${settings} cycle_us=${cycleUs.toFixed(1)} ` +
              `cycles_per_s=${(1e6 / cycleUs).toFixed(0)} handoff_median_us=${quantile(samples, 0.5).toFixed(1)} ` +
              `handoff_p99_us=${quantile(samples, 0.99).toFixed(1)}`);
  holderRedis.disconnect();
  waiterRedis.disconnect();
}

main().catch((error) => {
  console.error(`node_redlock.js: ${error.stack || error}`);
  process.exit(1);
});
