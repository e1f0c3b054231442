#!/usr/bin/env node
// The `cmesh` command: runs the TypeScript sources through swc (no build step).
const path = require('path');
process.env.TS_NODE_PROJECT ??= path.join(__dirname, '../../../tsconfig.json');
require('@swc-node/register');
require('../src/main.ts').main();
