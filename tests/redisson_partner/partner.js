// node-redisson as a live partner of tests/redisson.rs: one Node process, one Redis server, one
// lock name. Usage: node partner.js PORT NAME MODE [ARGS...]; it prints `ready` once connected.
// Waiting is lock(), which waits without bound: node-redisson's tryLock(waitTime) gives up
// when a wait for the unlock message reaches the holder's PTTL instead of trying again, so a
// holder that vanished would fail it (the caller bounds the wait by killing the process).
//   race COUNTER ROUNDS  lock, bump the counter file outside Redis (an O_EXCL marker file says
//                        whether two holders were ever inside at once), unlock; ROUNDS times
//   hold                 lock (watchdog 30 s, renewed every 10 s) and hold until killed; prints
//                        `held`
//   holdfor MS           lock, print `held`, hold MS ms, unlock, print `released <unix ms>`
//   wait                 wait for the lock; prints `got <unix ms>` when it has it
//                        (then unlocks)
// $WATCHDOG_MS sets Redisson's lockWatchdogTimeout (default 30000: renewed every third of it).
'use strict';
const fs = require('node:fs');
const { Redisson } = require('node-redisson');

const [port, name, mode, ...args] = process.argv.slice(2);
const redisson = new Redisson({
  redis: { options: { host: '127.0.0.1', port: Number(port) } },
  lockWatchdogTimeout: BigInt(process.env.WATCHDOG_MS || '30000'),
});

function bump(counter) {
  const marker = `${counter}.inside`;
  let fd;
  try {
    fd = fs.openSync(marker, 'wx');
  } catch (e) {
    fs.appendFileSync(`${counter}.overlaps`, 'node\n');
  }
  const v = Number(fs.readFileSync(counter, 'utf8') || '0');
  const until = Date.now() + 1;
  while (Date.now() < until) { /* a millisecond inside */ }
  fs.writeFileSync(counter, String(v + 1));
  if (fd !== undefined) {
    fs.closeSync(fd);
    fs.unlinkSync(marker);
  }
}

async function main() {
  await redisson.redis.ping();
  const lock = redisson.getLock(name);
  console.log('ready');
  if (mode === 'race') {
    const [counter, rounds] = args;
    for (let i = 0; i < Number(rounds); i++) {
      await lock.lock();
      bump(counter);
      await lock.unlock();
    }
  } else if (mode === 'hold') {
    await lock.lock();
    console.log('held');
    await new Promise(() => {});
  } else if (mode === 'holdfor') {
    await lock.lock();
    console.log('held');
    await new Promise((resolve) => setTimeout(resolve, Number(args[0])));
    await lock.unlock();
    console.log(`released ${Date.now()}`);
  } else if (mode === 'wait') {
    await lock.lock();
    console.log(`got ${Date.now()}`);
    await lock.unlock();
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  await redisson.quit();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
