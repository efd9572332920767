// Who may drive a backend over HTTP and where it may write: the shared bearer token, the loopback
// rule, and the state root that confines `save`/`load`. Not the transport (serve.ts) nor the client.

import { createHash, timingSafeEqual } from 'node:crypto';
import { lstatSync, realpathSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { dirname, isAbsolute, join, sep } from 'node:path';
import { ProtocolError } from './errors.js';

/** The environment variable both servers and the CLI client take the shared token from. */
export const TOKEN_ENV = 'QRL_BACKEND_TOKEN';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * Whether binding to `host` keeps the server on this machine: `localhost`, 127.0.0.0/8 or ::1. Any
 * other name or address (0.0.0.0, a LAN address, a host name) needs a token.
 *
 * @example
 * ```ts
 * isLoopbackHost('127.0.0.2'); // true
 * isLoopbackHost('0.0.0.0');   // false
 * ```
 */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Why a request's `Authorization` header does not carry `token`, or null when it does. Compared in
 * constant time on the SHA-256 digests (equal-length buffers whatever the lengths of the strings).
 */
export function tokenProblem(authorization: string | undefined, token: string): 'missing token' | 'wrong token' | null {
  const m = /^Bearer\s+(.*)$/i.exec(authorization ?? '');
  if (m === null || m[1]!.trim() === '') return 'missing token';
  return timingSafeEqual(digest(m[1]!.trim()), digest(token)) ? null : 'wrong token';
}

/**
 * The real path `path` names, resolved component by component as the OS will (a symlink is
 * followed where it stands, `..` then applies to its target); components that do not exist yet are
 * kept as written. Null for a dangling symlink (where it would lead is not known).
 */
function realPathOf(path: string): string | null {
  let current: string = sep;
  for (const part of path.split(sep)) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      current = dirname(current);
      continue;
    }
    const next = join(current, part);
    try {
      current = realpathSync(next);
    } catch {
      try {
        if (lstatSync(next).isSymbolicLink()) return null;
      } catch {
        // does not exist: kept as written
      }
      current = next;
    }
  }
  return current;
}

/**
 * Refuses a `save`/`load` directory outside `root` (a real path): after the symlinks of its
 * existing part are followed and `..` applied, it must be `root` or below it. Relative paths are
 * taken from the working directory, as the backend would open them. Throws a {@link ProtocolError}
 * (answered −32602) whose field is `dir`, naming the path.
 */
export function refuseOutsideRoot(root: string, method: 'save' | 'load' | 'dumpEngine', dir: string): void {
  const real = realPathOf(isAbsolute(dir) ? dir : join(process.cwd(), dir));
  const inside = real !== null && (real === root || real.startsWith(root.endsWith(sep) ? root : `${root}${sep}`));
  if (!inside) {
    const where =
      real === null ? 'a symlink whose target does not exist' : real === dir ? 'outside' : `${real}, outside`;
    throw new ProtocolError(method, 'dir', `${method}: dir '${dir}' is ${where} the state root ${root} (--state-root)`);
  }
}
