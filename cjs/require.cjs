// qrl-sim is ESM only: every `require('qrl-sim…')` lands here (package.json "exports", condition
// "require") and throws one clear line instead of ERR_PACKAGE_PATH_NOT_EXPORTED. Nothing else.
'use strict';
const error = new Error("qrl-sim is an ES module package (ESM only) and cannot be require()d: use `import { … } from 'qrl-sim'` in an ES module (\"type\": \"module\" or .mjs), or `await import('qrl-sim')` from CommonJS");
error.code = 'ERR_REQUIRE_ESM';
throw error;
