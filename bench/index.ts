// `npm run bench`: runs every benchmark section in order and prints its figures.
// Not a statistics tool: each section times its own runs; figures vary with the machine.
import { benchGemm } from './gemm.js';

const io = { out: (text: string): void => console.log(text) };

async function run(): Promise<void> {
  await benchGemm(io);
}

run().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
