// One jest run for the whole workspace in three tiers (jest projects; `--selectProjects unit`):
//   unit         *.spec.ts beside the sources: no child process, no external server (seconds)
//   integration  <package>/test/*.test.ts: one package against real processes (nats-server, ranks)
//   system       test/**: the deployed whole (compose, k8s, Prometheus, robustness, install, docs)
// @swc/jest keeps decorator metadata for NestJS.
const fs = require('fs');
const swcrc = JSON.parse(fs.readFileSync(`${__dirname}/.swcrc`, 'utf8'));
delete swcrc.$schema;

const existing = (dirs) => dirs.map((d) => `<rootDir>/${d}`).filter((p) => fs.existsSync(p.replace('<rootDir>', __dirname)));

const shared = {
  rootDir: __dirname,
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest', swcrc] },
  // the workspace's packages from their sources, as tsconfig.base.json's paths map them
  moduleNameMapper: {
    '^@cmesh/collectives/nccl$': '<rootDir>/libs/collectives/src/backends/nccl/index.ts',
    '^@cmesh/collectives/trace$': '<rootDir>/libs/collectives/src/trace/index.ts',
    '^@cmesh/collectives/nats$': '<rootDir>/libs/collectives/src/nats.ts',
    '^@cmesh/collectives/tensor$': '<rootDir>/libs/collectives/src/tensor/index.ts',
    '^@cmesh/bench/rows$': '<rootDir>/libs/bench/src/rows.ts',
    '^@cmesh/collectives/metrics$': '<rootDir>/libs/collectives/src/metrics/names.ts',
    '^@cmesh/collectives/names$': '<rootDir>/libs/collectives/src/names.ts',
    '^@cmesh/collectives/errors$': '<rootDir>/libs/collectives/src/errors.ts',
    '^@cmesh/collectives/nats-login$': '<rootDir>/libs/collectives/src/rendezvous/nats-credentials.ts',
    '^@cmesh/collectives/store-names$': '<rootDir>/libs/collectives/src/rendezvous/store-names.ts',
    '^@cmesh/collectives/host-identity$': '<rootDir>/libs/collectives/src/host-identity.ts',
    '^@cmesh/collectives/shm-addon$': '<rootDir>/libs/collectives/src/transport/shm/native.ts',
    '^@cmesh/protocol/kit$': '<rootDir>/libs/protocol/src/kit/index.ts',
    '^@cmesh/protocol/nest$': '<rootDir>/libs/protocol/src/kit/nest-transport.ts',
    '^@cmesh/testing/mesh$': '<rootDir>/libs/testing/src/mesh.ts',
    '^@cmesh/cli/(mesh|commands)$': '<rootDir>/apps/cli/src/$1/index.ts',
    '^@cmesh/coordinator/config$': '<rootDir>/apps/coordinator/src/config/coordinator-config.ts',
    '^@cmesh/coordinator/ui$': '<rootDir>/apps/coordinator/src/ui/ui-page.ts',
    '^@cmesh/rank-agent/config$': '<rootDir>/apps/rank-agent/src/configuration.ts',
    '^@cmesh/(collectives|protocol|bench|testing|client)$': '<rootDir>/libs/$1/src/index.ts',
  },
  modulePathIgnorePatterns: ['<rootDir>/(apps|libs)/[^/]+/dist/'],
  moduleFileExtensions: ['ts', 'js', 'json'],
};

module.exports = {
  // a global option: jest's runner ignores it in a project
  testTimeout: 120000,
  maxWorkers: 2,
  projects: [
    {
      ...shared,
      displayName: 'unit',
      roots: existing(['libs', 'apps', 'examples', 'bench']),
      testMatch: ['**/*.spec.ts'],
      // a spec that starts a process fails, naming the call: it belongs in its package's test/
      setupFilesAfterEnv: ['<rootDir>/scripts/jest/unit-tier.js'],
    },
    { ...shared, displayName: 'integration', roots: existing(['libs', 'apps', 'examples', 'bench']), testMatch: ['**/test/**/*.test.ts'] },
    { ...shared, displayName: 'system', roots: existing(['test']), testMatch: ['**/*.test.ts'] },
  ],
};
