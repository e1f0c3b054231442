#!/usr/bin/env node
// The `cmesh` command. Installed (or built), it runs the compiled dist/; in a checkout, where the
// TypeScript sources are beside it, it runs them through swc so no build step is needed (unless
// CMESH_PROGRAMS=dist asks for the build, as the suite does after building).
const fs = require('fs');
const path = require('path');

const source = path.join(__dirname, '../src/main.ts');
if (fs.existsSync(source) && process.env.CMESH_PROGRAMS !== 'dist') {
  process.env.TS_NODE_PROJECT ??= path.join(__dirname, '../../../tsconfig.json');
  require('@swc-node/register');
  require(source).main();
} else {
  require('../dist/main.js').main();
}
