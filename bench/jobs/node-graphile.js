// bench/jobs/node-graphile.js: bench/jobs.sh's Node baseline, graphile-worker (its jobs in
// PostgreSQL, picked up on LISTEN/NOTIFY) running the same trivial task as bench/jobs/app.lua,
// behind the same three routes, in one process as clank-run runs its jobs beside its routes:
//   POST /enqueue   {"n": N, "t": bool} → {"enqueued": N}: N noop jobs, with addJobs (one
//                   statement, graphile's bulk insert) when N > 1, with addJob when N = 1; with
//                   t, each payload's t is Date.now() when it is enqueued, else 0
//   GET /latencies  → [ms, ...]: Date.now() at each run with t > 0 minus its t; emptied
//   GET /done       → {"done": N, "lastMs": T}: jobs run in this process, Date.now() at the last
//   node bench/jobs/node-graphile.js --port N --db URL [--concurrency N] [--batch]
// --concurrency is graphile's concurrentJobs (default 10, clank's jobConcurrency); the worker's
// pool is max(10, concurrency + 2) connections, as graphile advises, and the enqueues have a pool
// of 4 of their own (clank.db's default). --batch turns on graphile's batching (localQueue of
// concurrency + 1 jobs, completeJobBatchDelay 0: the starting points its documentation
// suggests); without it, graphile's defaults. Logs warnings and errors only (graphile logs every job at info).
// Prints "node-graphile: serving at http://127.0.0.1:PORT/" once the worker runs and it listens.
'use strict'

const http = require('node:http')
const { run, makeWorkerUtils, Logger } = require('graphile-worker')

function option (name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const target = option('--db')
const port = Number(option('--port', '0'))
const concurrency = Number(option('--concurrency', '10'))
const batch = process.argv.includes('--batch')
const MAX_BATCH = 100000

if (!/^postgres(ql)?:\/\//.test(target || '')) {
  console.error('node-graphile: --db must be a postgres:// URL (graphile-worker runs on PostgreSQL only)')
  process.exit(2)
}

const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`graphile-worker ${level}: ${message}`)
})

let done = 0
let lastMs = 0
let latencies = []

const taskList = {
  noop: async (payload) => {
    const now = Date.now()
    done++
    lastMs = now
    if (payload.t > 0) latencies.push(now - payload.t)
  }
}

function send (res, status, body) {
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
    'content-length': Buffer.byteLength(text)
  })
  res.end(text)
}

function readBody (req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

async function main () {
  const runner = await run({
    connectionString: target,
    concurrency,
    maxPoolSize: Math.max(10, concurrency + 2),
    noHandleSignals: true,
    logger,
    taskList,
    preset: batch ? { worker: { localQueue: { size: concurrency + 1 }, completeJobBatchDelay: 0 } } : {}
  })
  const utils = await makeWorkerUtils({ connectionString: target, maxPoolSize: 4, logger })

  async function enqueue (req, res) {
    let body
    try { body = JSON.parse(await readBody(req)) } catch { body = null }
    if (body === null || typeof body !== 'object') return send(res, 400, 'expected a JSON body {"n": N, "t": bool}\n')
    const n = body.n
    if (!Number.isInteger(n) || n < 1 || n > MAX_BATCH) {
      return send(res, 400, `n must be an integer from 1 to ${MAX_BATCH}\n`)
    }
    const timed = body.t === true
    if (n === 1) {
      await utils.addJob('noop', { t: timed ? Date.now() : 0 })
    } else {
      const t = timed ? Date.now() : 0
      const specs = []
      for (let i = 0; i < n; i++) specs.push({ identifier: 'noop', payload: { t } })
      await utils.addJobs(specs)
    }
    send(res, 200, { enqueued: n })
  }

  const server = http.createServer((req, res) => {
    const route = `${req.method} ${req.url}`
    if (route === 'POST /enqueue') {
      enqueue(req, res).catch((err) => {
        console.error('node-graphile: enqueue failed:', err)
        send(res, 500, `${err.message}\n`)
      })
    } else if (route === 'GET /latencies') {
      const out = latencies
      latencies = []
      send(res, 200, out)
    } else if (route === 'GET /done') {
      send(res, 200, { done, lastMs })
    } else {
      send(res, 404, 'Not found.\n')
    }
  })
  server.keepAliveTimeout = 30000

  let stopping = false
  const stop = () => {
    if (stopping) return
    stopping = true
    // at most 5 s for a clean stop (no job is long), then out anyway
    setTimeout(() => process.exit(0), 5000).unref()
    server.close()
    Promise.allSettled([runner.stop(), utils.release()]).then(() => process.exit(0))
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  runner.promise.catch((err) => {
    console.error('node-graphile: the worker stopped:', err)
    process.exit(1)
  })

  server.listen(port, '127.0.0.1', () => {
    console.log(`node-graphile: serving at http://127.0.0.1:${server.address().port}/`)
  })
}

main().catch((err) => {
  console.error('node-graphile: could not start:', err)
  process.exit(1)
})
