// The mcp create option, run once per `e2b` release named by E2B_SDK:
// Paddock refuses it with a 400 that says why (docs/e2b.md, "The mcp
// option"), before any sandbox exists, rather than letting the SDK create a
// sandbox and then fail to start E2B's gateway in it.
import { test } from 'node:test'
import assert from 'node:assert/strict'

const sdkName = process.env.E2B_SDK || 'e2b'
const { Sandbox, InvalidArgumentError, SandboxError } = await import(sdkName)

test(`${sdkName}: Sandbox.create({mcp}) is refused, saying why and where Paddock's MCP server is`, async () => {
  const before = (await Sandbox.list().nextItems()).length
  for (const mcp of [{ fetch: {} }, {}]) {
    const err = await Sandbox.create({ mcp, timeoutMs: 60_000 }).then(
      (s) => { s.kill(); return new Error('created') },
      (e) => e,
    )
    assert.ok(err instanceof InvalidArgumentError || err instanceof SandboxError, `got ${err?.name}: ${err?.message}`)
    assert.match(err.message, /400.*mcp is not supported by Paddock.*\/mcp/s)
  }
  assert.equal((await Sandbox.list().nextItems()).length, before, 'no sandbox was left behind')
})
