// The unmodified `e2b` SDK's template builds (Template.build, the v2 build
// API) against a real Paddock daemon: files uploaded for copy steps, run
// steps as the default and another user, environment, work directory, a
// start command with a ready command, and a sandbox created from the
// result by its name. compat_test.go starts the daemon and names it, and
// runs this once per `e2b` release named by E2B_SDK, as the conformance
// suite.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const sdkName = process.env.E2B_SDK || 'e2b'
const { Sandbox, Template, waitForFile } = await import(sdkName)

const runID = `tb${process.pid}${Date.now() % 100000}`
const dir = mkdtempSync(join(tmpdir(), 'paddock-e2b-template-'))
mkdirSync(join(dir, 'folder', 'sub'), { recursive: true })
writeFileSync(join(dir, 'folder', 'a.txt'), 'alpha\n')
writeFileSync(join(dir, 'folder', 'b.txt'), 'beta\n')
writeFileSync(join(dir, 'folder', 'c.md'), 'not copied\n')
writeFileSync(join(dir, 'folder', 'sub', 'd.txt'), 'delta\n')
writeFileSync(join(dir, 'single.txt'), 'one file\n')
after(() => rmSync(dir, { recursive: true, force: true }))

test(`${sdkName}: Template.build, then Sandbox.create from it`, { timeout: 300_000 }, async () => {
  const name = `${runID}-ok`
  const template = Template({ fileContextPath: dir })
    .fromBaseImage()
    .copy('folder/*.txt', 'folder')
    .copy('folder/sub', '/opt/app/sub/')
    .copy('single.txt', '/opt/app/renamed.txt', { mode: 0o600 })
    .setEnvs({ GREETING: 'hello from the template' })
    .runCmd('cat folder/a.txt folder/b.txt > /home/user/joined.txt && whoami > /home/user/builder.txt')
    .runCmd('test "$(whoami)" = root && touch /etc/made-by-root', { user: 'root' })
    .setWorkdir('/opt/app')
    .setUser('root')
    .setStartCmd('sleep 1; echo started > /tmp/started; exec sleep 100000', waitForFile('/tmp/started'))
  const logs = []
  assert.equal(await Template.exists(name), false)
  const info = await Template.build(template, name, { onBuildLogs: (e) => logs.push(e.message) })
  assert.equal(info.templateId, name)
  assert.ok(logs.some((m) => m.includes('[') && m.includes('run')), `no step in the build's log: ${logs.join(' | ')}`)
  assert.equal(await Template.exists(name), true)

  const s = await Sandbox.create(name, { timeoutMs: 120_000 })
  try {
    const run = async (cmd, opts) => (await s.commands.run(cmd, opts)).stdout.trim()
    // The ready command passed before the create returned.
    assert.equal(await s.files.read('/tmp/started'), 'started\n')
    // The last user and work directory are the sandbox's defaults.
    assert.equal(await run('whoami'), 'root')
    assert.equal(await run('pwd'), '/opt/app')
    assert.equal(await run('whoami', { user: 'user' }), 'user')
    assert.equal(await run('echo "$GREETING"'), 'hello from the template')
    assert.equal(await s.files.read('/home/user/folder/a.txt'), 'alpha\n')
    assert.equal(await s.files.read('/home/user/folder/b.txt'), 'beta\n')
    assert.equal(await s.files.exists('/home/user/folder/c.md'), false)
    assert.equal(await s.files.read('/opt/app/sub/d.txt'), 'delta\n')
    assert.equal(await s.files.read('/opt/app/renamed.txt'), 'one file\n')
    assert.equal(await run('stat -c %a /opt/app/renamed.txt'), '600')
    assert.equal(await s.files.read('/home/user/joined.txt'), 'alpha\nbeta\n')
    assert.equal(await s.files.read('/home/user/builder.txt'), 'user\n')
    assert.equal(await s.files.exists('/etc/made-by-root'), true)
  } finally {
    await s.kill()
  }
})

test(`${sdkName}: a failing step fails the build with its exit code, at its line`, { timeout: 300_000 }, async () => {
  const template = Template()
    .fromBaseImage()
    .setEnvs({ FINE: 'yes' })
    .runCmd('echo about to fail; exit 7')
  await assert.rejects(Template.build(template, `${runID}-fail`), (e) => {
    assert.equal(e.name, 'BuildError')
    assert.match(e.message, /exit code 7/)
    // The build names the failed step, and the SDK shows where the
    // template defined it rather than where it polled.
    assert.ok(e.stack.includes('templates.test.mjs') && !e.stack.includes('waitForBuildFinish'), e.stack)
    return true
  })
  assert.equal(await Template.exists(`${runID}-fail`), false)
})

test(`${sdkName}: a user Paddock sandboxes do not have is refused`, async () => {
  const template = Template().fromBaseImage().runCmd('whoami', { user: 'root123' })
  await assert.rejects(Template.build(template, `${runID}-user`), /invalid username: "root123"/)
})

test(`${sdkName}: tags: a build under name:tag, more tags given, one created from, one removed`, { timeout: 300_000 }, async () => {
  const name = `${runID}-tags`
  const template = Template().fromBaseImage().runCmd('echo tagged > /home/user/which.txt')
  const info = await Template.build(template, `${name}:v1`, { tags: ['ci'] })
  assert.equal(info.templateId, name)
  assert.ok(info.buildId)
  // Only the tags named: the plain name (the tag default) is not made.
  assert.equal(await Template.exists(name), true)
  await assert.rejects(Sandbox.create(name, { timeoutMs: 60_000 }))

  const tagged = await Template.assignTags(`${name}:v1`, ['prod', 'latest'])
  assert.ok(tagged.buildId)
  assert.deepEqual([...tagged.tags].sort(), ['latest', 'prod'])
  await assert.rejects(Template.assignTags(`${name}:v1`, ':bad'))
  await assert.rejects(Template.assignTags(`${name}:v1`, `${name}:`))
  await assert.rejects(Template.assignTags(`${name}:nope`, 'x'))

  const tags = await Template.getTags(name)
  assert.deepEqual(tags.map((t) => t.tag).sort(), ['ci', 'latest', 'prod', 'v1'])
  assert.ok(tags.every((t) => t.buildId === tagged.buildId && t.createdAt instanceof Date && !isNaN(t.createdAt)))

  const s = await Sandbox.create(`${name}:prod`, { timeoutMs: 60_000 })
  try {
    assert.equal(await s.files.read('/home/user/which.txt'), 'tagged\n')
    // A sandbox's template is the name, whatever tag made it.
    assert.equal((await s.getInfo()).templateId, name)
  } finally {
    await s.kill()
  }

  await Template.removeTags(name, ['prod', 'ci'])
  assert.deepEqual((await Template.getTags(name)).map((t) => t.tag).sort(), ['latest', 'v1'])
  await assert.rejects(Sandbox.create(`${name}:prod`, { timeoutMs: 60_000 }))
  await assert.rejects(Template.removeTags(name, 'prod'))
  await assert.rejects(Template.removeTags(`${runID}-none`, 'x'))
  // E2B's template delete (the SDK's deleteSnapshot sends it) deletes
  // every tag of the name.
  assert.equal(await Sandbox.deleteSnapshot(name), true)
  assert.equal(await Template.exists(name), false)
})

test(`${sdkName}: two builds of one name at once, each with files of its own`, { timeout: 300_000 }, async () => {
  // E2B's upload call names the template, not the build: both builds'
  // files may land with one of them, and each still gets its own.
  const name = `${runID}-twin`
  const one = Template({ fileContextPath: dir }).fromBaseImage().copy('folder/a.txt', '/opt/one.txt')
  const two = Template({ fileContextPath: dir }).fromBaseImage().copy('folder/b.txt', '/opt/two.txt')
  await Promise.all([Template.build(one, `${name}:one`), Template.build(two, `${name}:two`)])
  for (const [tag, file, want] of [['one', '/opt/one.txt', 'alpha\n'], ['two', '/opt/two.txt', 'beta\n']]) {
    const s = await Sandbox.create(`${name}:${tag}`, { timeoutMs: 60_000 })
    try {
      assert.equal(await s.files.read(file), want)
    } finally {
      await s.kill()
    }
  }
  assert.equal(await Sandbox.deleteSnapshot(name), true)
})

test(`${sdkName}: symlinks in copied files: relative, absolute, dangling, and resolved`, { timeout: 300_000 }, async () => {
  const ctx = mkdtempSync(join(tmpdir(), 'paddock-e2b-links-'))
  try {
    mkdirSync(join(ctx, 'folder'))
    writeFileSync(join(ctx, 'folder', 'test.txt'), 'This is a test file.')
    symlinkSync('test.txt', join(ctx, 'folder', 'symlink.txt'))
    symlinkSync(join(ctx, 'folder', 'test.txt'), join(ctx, 'folder', 'symlink2.txt'))
    symlinkSync('12345test.txt', join(ctx, 'folder', 'symlink3.txt'))
    const name = `${runID}-links`
    const template = Template({ fileContextPath: ctx })
      .fromBaseImage()
      .copy('folder/*', 'folder', { forceUpload: true })
      .copy('folder/symlink.txt', 'resolved/symlink.txt', { forceUpload: true, resolveSymlinks: true })
      .runCmd('cat folder/symlink.txt && test -L folder/symlink3.txt && test ! -L resolved/symlink.txt && cat resolved/symlink.txt')
    await Template.build(template, name)
    const s = await Sandbox.create(name, { timeoutMs: 60_000 })
    try {
      assert.equal((await s.commands.run('readlink folder/symlink.txt; readlink folder/symlink3.txt')).stdout, 'test.txt\n12345test.txt\n')
      assert.equal(await s.files.read('/home/user/resolved/symlink.txt'), 'This is a test file.')
    } finally {
      await s.kill()
    }
    assert.equal(await Sandbox.deleteSnapshot(name), true)
  } finally {
    rmSync(ctx, { recursive: true, force: true })
  }
})

test('uploads need their build\'s token, not a guess', async () => {
  const url = new URL(`/paddock/e2b-template-uploads/${'0'.repeat(64)}/${'a'.repeat(64)}`, process.env.E2B_API_URL)
  const r = await fetch(url, { method: 'PUT', body: 'x' })
  assert.equal(r.status, 404)
})
