// ESLint (flat config): typescript-eslint's recommended rules over every TypeScript and JavaScript
// file and, with type information (the root tsconfig.json's program, one for the whole workspace),
// the rules that catch a promise nobody waits for: its rejection would be lost or crash the process.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' }],
      // a promise is awaited, returned, or handled (.catch, or `void` where a comment says who
      // handles its failure); a promise is not passed where a callback's result is ignored (an
      // async listener or NATS callback whose rejection nobody sees); what is awaited is a promise
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
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
