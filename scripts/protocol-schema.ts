// Writes docs/qrl-backend-1.schema.json, the JSON Schema of every qrl-backend/1 message, from the zod
// schemas (src/protocol/json-schema.ts). test/protocol/json-schema.test.ts pins the file.
// Usage: npx tsx scripts/protocol-schema.ts

import { writeFileSync } from 'node:fs';
import { protocolJsonSchemaText } from '../src/protocol/json-schema.js';

writeFileSync('docs/qrl-backend-1.schema.json', protocolJsonSchemaText());
process.stdout.write('wrote docs/qrl-backend-1.schema.json\n');
