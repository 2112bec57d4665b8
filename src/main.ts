// Entry point. Node's on-disk compile cache is switched on before the service's modules load: every
// start after the first skips compiling them again (a few tens of milliseconds). The cache lives
// in NODE_COMPILE_CACHE or the system's temporary directory; where it cannot be written, Node goes on
// without it, and NODE_DISABLE_COMPILE_CACHE=1 turns it off.
import { enableCompileCache } from 'node:module';

enableCompileCache();
await import('./command-line.ts');
