// Public surface of policy backends: the asynchronous contract the GRPO loop drives and the
// in-process reference backend. Not the policies themselves (policies/).

export * from './contract.js';
export * from './reference.js';
