// A fault injector for the run tests: relays newline-delimited JSON-RPC between the driver and a
// backend command, and at the N-th request of a method dies (exit 3), hangs, or answers garbage.
// Usage: `node --import tsx test/protocol/faulty-proxy.ts die|hang|garbage METHOD N -- COMMAND...`.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const [mode, method, nth, sep, ...command] = process.argv.slice(2);
if (!['die', 'hang', 'garbage'].includes(mode ?? '') || method === undefined || sep !== '--' || command.length === 0) {
  process.stderr.write('usage: faulty-proxy.ts die|hang|garbage METHOD N -- COMMAND...\n');
  process.exit(2);
}
const child = spawn(command.join(' '), { shell: true, stdio: ['pipe', 'pipe', 'inherit'] });
child.stdout.pipe(process.stdout);
let seen = 0;
let tripped = false;
createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', (line) => {
  if (tripped) return;
  const m = JSON.parse(line) as { method?: string };
  if (m.method === method && ++seen === Number(nth)) {
    tripped = true;
    process.stderr.write(`faulty-proxy: ${mode} at ${method} #${nth}\n`);
    if (mode === 'die') {
      child.kill('SIGKILL');
      process.exit(3);
    }
    if (mode === 'garbage') process.stdout.write('<html>502 Bad Gateway</html>\n');
    return; // hang: never forward, never answer
  }
  child.stdin.write(`${line}\n`);
});
process.stdin.on('end', () => child.stdin.end());
child.on('exit', (code) => process.exit(code ?? 1));
