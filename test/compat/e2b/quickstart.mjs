// E2B's quick start, unmodified but for the template: create a sandbox, run
// code, write and read a file, kill. Configured only by E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY.
import { Sandbox } from 'e2b'

const sbx = await Sandbox.create()
const result = await sbx.commands.run('python3 -c "print(6*7)"')
console.log(result.stdout.trim())
await sbx.files.write('/home/user/hello.txt', 'hello world')
console.log(await sbx.files.read('/home/user/hello.txt'))
await sbx.kill()
