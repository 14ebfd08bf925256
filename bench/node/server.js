// bench/node/server.js: the fastify + ajv baseline of bench/http.sh. The same
// routes as bench/app.lua, written the way a fastify user writes them: a route
// schema for the body, compiled by our own ajv (all errors, no coercion, no
// stripping of unknown keys, so it accepts and rejects what clank.schema does),
// an error handler that turns ajv's errors into clank's envelope and messages
// (SPEC §3, §5), and a response schema so fastify serializes the output fast.
//   node bench/node/server.js --port N --manifest FILE
// prints "node: serving at http://127.0.0.1:PORT/" once it listens.
'use strict'

const { createHash } = require('node:crypto')
const { readFileSync } = require('node:fs')
const Ajv = require('ajv')
const Fastify = require('fastify')

const MAX_BODY = 65536

function option (name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const manifest = readFileSync(option('--manifest'), 'utf8').replace(/\n$/, '')
const etag = '"' + createHash('sha256').update(manifest).digest('hex').slice(0, 16) + '"'

// The seed's CreateTask, as a fastify user writes it in JSON Schema. It accepts
// what clank's manifest schema accepts, spelled so that ajv gives one error
// where clank gives one issue: estimate as a type list instead of anyOf
// [number >= 0, null] (three errors), priority as a bare enum (a type error
// and an enum error for a non-string).
const CreateTask = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 120, description: 'Short task title' },
    priority: { enum: ['low', 'normal', 'high'] },
    estimate: { type: ['number', 'null'], minimum: 0 },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 10 }
  },
  required: ['estimate', 'tags', 'title'],
  additionalProperties: false
}

const Created = {
  type: 'object',
  properties: {
    ok: { type: 'boolean' },
    output: {
      type: 'object',
      properties: { id: { type: 'string' }, created: { type: 'boolean' } },
      required: ['created', 'id']
    }
  },
  required: ['ok', 'output']
}

const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, coerceTypes: false, removeAdditional: false })

// ------------------------------------------------------------ ajv → clank issues

// The message clank gives a missing key: its schema's type error.
const missing = {
  title: ['Expected a string.', 'string'],
  estimate: ['Expected a finite number.', 'number'],
  tags: ['Expected an array.', 'array']
}

const typeMessages = {
  string: ['Expected a string.', 'string'],
  number: ['Expected a finite number.', 'number'],
  'number,null': ['Expected a finite number.', 'number'],
  array: ['Expected an array.', 'array'],
  object: ['Expected an object.', 'object']
}

// One ajv error as { path, message, expected? }, path 0-based like clank's.
function issue (error) {
  const path = error.instancePath === ''
    ? []
    : error.instancePath.slice(1).split('/').map((key) => {
      const k = key.replace(/~1/g, '/').replace(/~0/g, '~')
      return /^(0|[1-9][0-9]*)$/.test(k) ? Number(k) : k
    })
  const p = error.params
  switch (error.keyword) {
    case 'required': {
      const [message, expected] = missing[p.missingProperty]
      return { path: [...path, p.missingProperty], message, expected }
    }
    case 'additionalProperties':
      return { path: [...path, p.additionalProperty], message: 'Unknown property.', unknown: true }
    case 'type': {
      const [message, expected] = typeMessages[[].concat(p.type).join(',')] || ['Invalid value.']
      return { path, message, expected }
    }
    case 'enum':
      return { path, message: `Expected one of: ${p.allowedValues.join(', ')}.`, expected: 'enum' }
    case 'minLength':
      return { path, message: `Must contain at least ${p.limit} characters.` }
    case 'maxLength':
      return { path, message: `Must contain at most ${p.limit} characters.` }
    case 'maxItems':
      return { path, message: `Must contain at most ${p.limit} items.` }
    case 'minimum':
      return { path, message: `Must be at least ${p.limit}.` }
    default:
      return { path, message: error.message }
  }
}

// clank's order: every key's issues in key order, then the unknown keys.
function byKey (a, b) {
  if (!!a.unknown !== !!b.unknown) return a.unknown ? 1 : -1
  const ka = String(a.path[0] ?? '')
  const kb = String(b.path[0] ?? '')
  return ka < kb ? -1 : ka > kb ? 1 : 0
}

function invalidInput (errors) {
  const details = errors.map(issue).sort(byKey)
  const message = details
    .map((d) => (d.path.length ? d.path.join('.') : 'value') + ': ' + d.message)
    .join('; ')
  for (const d of details) delete d.unknown
  return { code: 'INVALID_INPUT', message, details }
}

function fail (reply, status, error) {
  return reply.code(status).header('cache-control', 'no-store').send({ ok: false, error })
}

// ------------------------------------------------------------ server

const app = Fastify({ logger: false, bodyLimit: MAX_BODY })
app.setValidatorCompiler(({ schema }) => ajv.compile(schema))
app.removeContentTypeParser('text/plain') // JSON only, as the bridge: 415 otherwise

app.setErrorHandler((error, request, reply) => {
  if (error.validation) return fail(reply, 422, invalidInput(error.validation))
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return fail(reply, 415, { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Expected an application/json request body.' })
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return fail(reply, 400, { code: 'INVALID_JSON', message: 'A JSON request body is required.' })
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return fail(reply, 400, { code: 'INVALID_JSON', message: 'Request body is not valid JSON.' })
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fail(reply, 413, { code: 'PAYLOAD_TOO_LARGE', message: `Request body exceeds ${MAX_BODY} bytes.` })
  }
  if (error instanceof SyntaxError) {
    return fail(reply, 400, { code: 'INVALID_JSON', message: 'Request body is not valid JSON.' })
  }
  return fail(reply, 500, { code: 'ACTION_FAILED', message: 'The action failed.' })
})

app.get('/hello', (request, reply) => {
  reply.type('text/plain; charset=utf-8').send('Hello, world!\n')
})

app.get('/manifest', (request, reply) => {
  reply.header('cache-control', 'no-cache').header('etag', etag)
  if (request.headers['if-none-match'] === etag) return reply.code(304).send()
  reply.type('application/json').send(manifest)
})

app.post('/actions/tasks.create', {
  schema: { body: CreateTask, response: { 200: Created } }
}, async () => ({ ok: true, output: { id: 't1', created: true } }))

app.listen({ host: '127.0.0.1', port: Number(option('--port', '0')) }).then(() => {
  console.log(`node: serving at http://127.0.0.1:${app.server.address().port}/`)
}, (error) => {
  console.error(`node: ${error.message}`)
  process.exit(1)
})

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => { app.close().then(() => process.exit(0)) })
}
