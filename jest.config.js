// One jest run for the whole workspace; @swc/jest keeps decorator metadata for NestJS.
const fs = require('fs');
const swcrc = JSON.parse(fs.readFileSync(`${__dirname}/.swcrc`, 'utf8'));
delete swcrc.$schema;

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/libs', '<rootDir>/apps', '<rootDir>/examples', '<rootDir>/bench', '<rootDir>/test'].filter((p) =>
    fs.existsSync(p.replace('<rootDir>', __dirname)),
  ),
  testMatch: ['**/*.spec.ts', '**/test/**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', swcrc] },
  // the workspace's packages from their sources, as tsconfig.base.json's paths map them
  moduleNameMapper: {
    '^@cmesh/collectives/metrics$': '<rootDir>/libs/collectives/src/metrics/names.ts',
    '^@cmesh/collectives/names$': '<rootDir>/libs/collectives/src/names.ts',
    '^@cmesh/collectives/errors$': '<rootDir>/libs/collectives/src/errors.ts',
    '^@cmesh/collectives/nats-login$': '<rootDir>/libs/collectives/src/rendezvous/nats-credentials.ts',
    '^@cmesh/collectives/store-names$': '<rootDir>/libs/collectives/src/rendezvous/store-names.ts',
    '^@cmesh/collectives/host-identity$': '<rootDir>/libs/collectives/src/host-identity.ts',
    '^@cmesh/collectives/shm-addon$': '<rootDir>/libs/collectives/src/transport/shm/native.ts',
    '^@cmesh/protocol/nest$': '<rootDir>/libs/protocol/src/nest/inbound-transport.ts',
    '^@cmesh/(collectives|protocol|bench|testing|client)$': '<rootDir>/libs/$1/src/index.ts',
  },
  modulePathIgnorePatterns: ['<rootDir>/(apps|libs)/[^/]+/dist/'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  testTimeout: 120000,
  maxWorkers: 2,
};
