// ESLint (flat config): typescript-eslint's recommended rules over every TypeScript and JavaScript
// file and, with type information (the root tsconfig.json's program, one for the whole workspace),
// the rules that catch a promise nobody waits for: its rejection would be lost or crash the process.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Imports that reach into another package's files instead of through its exports. */
const PACKAGE_BOUNDARIES = [
  {
    // up out of this package, then down into some package's src/ or test/
    regex: '^(\\.\\./)+([^./][^/]*/)+(src|test)(/|$)',
    message:
      "another package's src/ or test/: import it by its package name (@cmesh/...) and an entry its package.json exports; shared fixtures live in @cmesh/testing",
  },
  { regex: '^@cmesh/[^/]+/(src|test|dist)(/|$)', message: "import a package's exported entries, not its files" },
];

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '**/build/**', '.tmp/**', '.nx/**', '.gpu/**', 'coverage/**', 'native/**/build/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { ...globals.node },
      parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // names starting with _ are deliberately unused (destructuring away, interface shapes)
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // a promise is awaited, returned, or handled (.catch, or `void` where a comment says who
      // handles its failure); a promise is not passed where a callback's result is ignored (an
      // async listener or NATS callback whose rejection nobody sees); what is awaited is a promise
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // Package boundaries (docs/architecture.md): code reaches another package only through its
    // name and the entries its package.json exports, never into its src/, test/ or dist/ by path.
    files: ['**/*.ts', '**/*.mjs', '**/*.js', '**/*.cjs'],
    rules: { 'no-restricted-imports': ['error', { patterns: PACKAGE_BOUNDARIES }] },
  },
  {
    // The libraries sit below the apps: none imports an app (libs/testing's mesh fixture is
    // `cmesh up`'s launcher, through @cmesh/cli/mesh).
    files: ['libs/*/src/**/*.ts'],
    ignores: ['libs/testing/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...PACKAGE_BOUNDARIES,
            {
              group: ['@cmesh/cli', '@cmesh/cli/*', '@cmesh/coordinator', '@cmesh/coordinator/*', '@cmesh/rank-agent', '@cmesh/rank-agent/*'],
              message: 'a library does not depend on an app',
            },
          ],
        },
      ],
    },
  },
  {
    // @cmesh/protocol's wire contract (src/*.ts) stands alone; its app kit (src/kit/) builds on it
    files: ['libs/protocol/src/*.ts'],
    ignores: ['libs/protocol/src/*.spec.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [...PACKAGE_BOUNDARIES, { group: ['./kit', './kit/*'], message: 'the wire contract does not depend on the app kit' }] },
      ],
    },
  },
  {
    // The coordinator is control plane only: it takes the library's names, NATS helpers, trace
    // analysis and bench arithmetic from their entries, never the root that loads the data plane
    // (process groups, transports, the shm addon) nor the NCCL sidecar client.
    files: ['apps/coordinator/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: '@cmesh/collectives',
              message: 'use @cmesh/collectives/{nats,trace,errors,names,tensor,store-names,metrics}: the root loads the data plane',
            },
            { name: '@cmesh/collectives/nccl', message: 'the coordinator runs no collective' },
            { name: '@cmesh/collectives/shm-addon', message: 'the coordinator runs no collective' },
            { name: '@cmesh/bench', message: 'use @cmesh/bench/rows: the root loads the timed loops and the NCCL sweep' },
            { name: '@cmesh/client', message: 'the coordinator runs no collective' },
          ],
          patterns: PACKAGE_BOUNDARIES,
        },
      ],
    },
  },
  {
    // Tests read replies and parsed documents (JSON, YAML) dynamically and check them with
    // assertions; typing each shape there would only restate the assertions. Sources keep the rule.
    files: ['**/test/**/*.ts', '**/*.spec.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // JavaScript (launchers, build scripts, configuration) is in no TypeScript program
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
