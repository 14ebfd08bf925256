// bench/db/server.js: the Node baselines of bench/db.sh, fastify + ajv with node-postgres (pg,
// non-blocking) or better-sqlite3 (synchronous, as its users run it), answering what apps/tasks
// answers for tasks.create and tasks.list with the same statements as apps/tasks/store.lua; and
// GET /manifest with POST /actions/slow (SELECT pg_sleep(0.2)) for the latency under slow queries.
//   node bench/db/server.js --port N --db URL|PATH [--user NAME] [--pool N]
// prints "node: serving at http://127.0.0.1:PORT/" once it listens.
'use strict'

const Ajv = require('ajv')
const Fastify = require('fastify')

function option (name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const target = option('--db')
const owner = option('--user', 'local')
const poolSize = Number(option('--pool', '4'))
const postgres = /^postgres(ql)?:\/\//.test(target)

// ------------------------------------------------------------ the database

// The same schema and statements as apps/tasks/store.lua.
const SCHEMA = postgres
  ? `CREATE TABLE IF NOT EXISTS tasks (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner TEXT NOT NULL,
      title TEXT NOT NULL, priority TEXT, estimate DOUBLE PRECISION, tags TEXT NOT NULL,
      completed INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
      created_at BIGINT NOT NULL)`
  : `CREATE TABLE IF NOT EXISTS tasks (
      id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL,
      title TEXT NOT NULL, priority TEXT, estimate REAL, tags TEXT NOT NULL,
      completed INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL)`
const INDEX = 'CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, id)'
const COLUMNS = 'id, title, priority, estimate, tags, completed, archived, created_at'
const INSERT = 'INSERT INTO tasks (owner, title, priority, estimate, tags, created_at)' +
  ' VALUES ($1, $2, $3, $4, $5, $6) RETURNING id'
const LIST = `SELECT ${COLUMNS} FROM tasks WHERE owner = $1 AND archived = 0 ORDER BY id`

let db
if (postgres) {
  const pg = require('pg')
  pg.types.setTypeParser(20, (v) => v) // int8 as text: ids as strings, as the app sends them
  db = {
    pool: new pg.Pool({ connectionString: target, max: poolSize }),
    async init () { await this.pool.query(SCHEMA); await this.pool.query(INDEX) },
    async insert (params) { return (await this.pool.query(INSERT, params)).rows[0].id },
    async list (who) { return (await this.pool.query(LIST, [who])).rows },
    async slow () { await this.pool.query('SELECT pg_sleep(0.2)') }
  }
} else {
  const Database = require('better-sqlite3')
  const conn = new Database(target)
  conn.pragma('busy_timeout = 5000')
  conn.pragma('journal_mode = WAL')
  // better-sqlite3 binds $1..$n as named parameters, from an object keyed 1..n
  const prepare = (sql) => conn.prepare(sql)
  const named = (params) => Object.fromEntries(params.map((v, i) => [i + 1, v]))
  let insert, list
  db = {
    async init () {
      conn.exec(SCHEMA); conn.exec(INDEX)
      insert = prepare(INSERT)
      list = prepare(LIST)
    },
    async insert (params) { return String(insert.get(named(params)).id) },
    async list (who) { return list.all(named([who])) },
    async slow () { throw new Error('no pg_sleep on SQLite') }
  }
}

// ------------------------------------------------------------ the routes

const CreateTask = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 120 },
    priority: { enum: ['low', 'normal', 'high'] },
    estimate: { type: ['number', 'null'], minimum: 0 },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 10 }
  },
  required: ['estimate', 'tags', 'title'],
  additionalProperties: false
}
const ListTasks = {
  type: 'object',
  properties: { includeArchived: { type: 'boolean' } },
  additionalProperties: false
}

const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, coerceTypes: false, removeAdditional: false })
const app = Fastify({ logger: false, bodyLimit: 65536 })
app.setValidatorCompiler(({ schema }) => ajv.compile(schema))

function fail (reply, status, code, message) {
  return reply.code(status).header('cache-control', 'no-store').send({ ok: false, error: { code, message } })
}

app.setErrorHandler((error, request, reply) => {
  if (error.validation) return fail(reply, 422, 'INVALID_INPUT', error.message)
  return fail(reply, 500, 'ACTION_FAILED', 'The action failed.')
})

function decodeTags (text) {
  try {
    const tags = JSON.parse(text)
    return Array.isArray(tags) ? tags : []
  } catch { return [] }
}

function toTask (row) {
  const task = {
    id: String(row.id),
    title: row.title,
    estimate: row.estimate === null ? null : Number(row.estimate),
    tags: decodeTags(row.tags),
    completed: Number(row.completed) === 1,
    archived: Number(row.archived) === 1,
    createdAt: Number(row.created_at)
  }
  if (row.priority !== null) task.priority = row.priority
  return task
}

app.post('/actions/tasks.create', { schema: { body: CreateTask } }, async (request, reply) => {
  if (request.headers['x-clank-confirmation'] !== 'confirmed') {
    return fail(reply, 428, 'CONFIRMATION_REQUIRED', 'This action requires explicit confirmation.')
  }
  const t = request.body
  if (t.title.includes('\0') || t.tags.some((tag) => tag.includes('\0'))) {
    return fail(reply, 422, 'INVALID_INPUT', 'Must not contain NUL characters.')
  }
  const id = await db.insert([owner, t.title, t.priority ?? null, t.estimate, JSON.stringify(t.tags),
    Math.floor(Date.now() / 1000)])
  return { ok: true, output: { id: String(id), created: true } }
})

app.post('/actions/tasks.list', { schema: { body: ListTasks } }, async () => {
  const rows = await db.list(owner)
  return { ok: true, output: { tasks: rows.map(toTask) } }
})

app.get('/manifest', (request, reply) => {
  reply.header('cache-control', 'no-cache').type('application/json')
    .send('{"actions":[],"protocol":"clank-agent/1"}')
})

app.post('/actions/slow', async () => {
  await db.slow()
  return { ok: true, output: { slept: true } }
})

db.init().then(() => app.listen({ host: '127.0.0.1', port: Number(option('--port', '0')) })).then(() => {
  console.log(`node: serving at http://127.0.0.1:${app.server.address().port}/`)
}, (error) => {
  console.error(`node: ${error.message}`)
  process.exit(1)
})

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => { app.close().then(() => process.exit(0)) })
}
