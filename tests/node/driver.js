'use strict'
// One long-lived node process a test module drives step by step (tests/clients/node.py,
// NodeSession): each stdin line is {"id", "code"}; `code` is the body of an async
// function of (ctx, require) whose return value goes back as one stdout line
// {"id", "ok", "result"|"error"}. `ctx` persists across steps, so clients stay
// connected while the Python side injects faults or moves leaders between steps.
// The clients' own logging goes to stderr: stdout carries only the replies.
const readline = require('node:readline')

const out = process.stdout.write.bind(process.stdout)
for (const name of ['log', 'info', 'warn', 'debug']) {
  console[name] = (...args) => process.stderr.write(args.map(String).join(' ') + '\n')
}

const ctx = {
  // poll `pred` (sync or async) until truthy, failing after `ms`
  async until (pred, ms = 20000, what = 'condition') {
    const deadline = Date.now() + ms
    for (;;) {
      const v = await pred()
      if (v) return v
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  },
  sleep: ms => new Promise(resolve => setTimeout(resolve, ms)),
  // Buffer | string | null -> string | null, for JSON replies
  str: b => (b === null || b === undefined ? null : Buffer.isBuffer(b) ? b.toString('latin1') : String(b))
}

const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor

// BigInt (offsets, producer ids) as strings, Map and Set as objects and arrays
function plain (_key, v) {
  if (typeof v === 'bigint') return v.toString()
  if (v instanceof Map) return Object.fromEntries(v)
  if (v instanceof Set) return [...v]
  return v
}

function reply (msg) {
  out(JSON.stringify(msg, plain) + '\n')
}

function describe (err) {
  if (!(err instanceof Error)) return String(err)
  const parts = [`${err.name}: ${err.message}`]
  if (err.type) parts.push(`type=${err.type}`)
  if (err.code) parts.push(`code=${err.code}`)
  if (err.errors) parts.push(`errors=${JSON.stringify(err.errors.map(e => (e && e.message) || String(e)))}`)
  if (err.cause) parts.push(`cause=${describe(err.cause)}`)
  parts.push(String(err.stack || '').split('\n').slice(1, 6).join('\n'))
  return parts.join(' ')
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', line => {
  if (!line.trim()) return
  const { id, code } = JSON.parse(line)
  Promise.resolve()
    .then(() => new AsyncFunction('ctx', 'require', code)(ctx, require))
    .then(
      result => reply({ id, ok: true, result: result === undefined ? null : result }),
      err => reply({ id, ok: false, error: describe(err) })
    )
})
rl.on('close', () => process.exit(0))
process.on('unhandledRejection', err => process.stderr.write(`unhandled rejection: ${describe(err)}\n`))
// a client left running by a failed test must not take the session (and the next tests) down
process.on('uncaughtException', err => process.stderr.write(`uncaught exception: ${describe(err)}\n`))
