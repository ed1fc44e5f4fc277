// bench/peers/rlf-server.js -- the peer of `floodgate serve` on Redis in
// bench/peers.sh: node's http module answering each request after
// rate-limiter-flexible's RateLimiterRedis.consume(key) over ioredis, 200
// when allowed, 429 when refused (503 when Redis failed).
//
//   node rlf-server.js PORT REDIS_PORT
//
// Three limiters, chosen by the path, the key by the query's key=:
//   /high       1,000,000 points a second (most requests allowed)
//   /low        100 points a second (a flood is mostly refused)
//   /lowblock   the same, with rate-limiter-flexible's in-memory block of a
//               key once it has consumed its points (inMemoryBlockOnConsumed)
// It prints "listening" once Redis is ready and the port is bound.
'use strict';
const http = require('http');
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const port = Number(process.argv[2]);
const redisPort = Number(process.argv[3]);
const redis = new Redis({ host: '127.0.0.1', port: redisPort });

const limiters = {
    '/high': new RateLimiterRedis({
        storeClient: redis, keyPrefix: 'rlfhigh', points: 1000000, duration: 1,
    }),
    '/low': new RateLimiterRedis({
        storeClient: redis, keyPrefix: 'rlflow', points: 100, duration: 1,
    }),
    '/lowblock': new RateLimiterRedis({
        storeClient: redis, keyPrefix: 'rlfblock', points: 100, duration: 1,
        inMemoryBlockOnConsumed: 100,
    }),
};

// The path and the key are split by hand rather than by new URL(): the
// server should spend its time where floodgate's does, on the decision.
function answer(req, res) {
    const url = req.url;
    const q = url.indexOf('?');
    const limiter = limiters[q < 0 ? url : url.slice(0, q)];
    const k = url.indexOf('key=', q);
    if (!limiter || q < 0 || k < 0) {
        res.statusCode = 404;
        res.end();
        return;
    }
    const amp = url.indexOf('&', k);
    const key = url.slice(k + 4, amp < 0 ? url.length : amp);
    limiter.consume(key).then(
        () => { res.statusCode = 200; res.end(); },
        (why) => { res.statusCode = why instanceof Error ? 503 : 429; res.end(); });
}

redis.once('ready', () => {
    http.createServer(answer).listen(port, '127.0.0.1', () => {
        console.log('listening');
    });
});
redis.on('error', (e) => { console.error('redis: ' + e.message); });
