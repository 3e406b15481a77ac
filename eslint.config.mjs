// One lint config for the whole tree (STYLE.md): typescript-eslint's type-checked recommended rules,
// zero warnings (`npm run lint`, run by `npm test`). Formatting is Prettier's (.prettierrc.json).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      '**/dist/**', // packed packages' builds (libs/client, apps/cli)
      'node_modules/**',
      '.tools/**',
      'coverage/**',
      'artifacts/**',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs',
      '**/*.mts',
      // Generated (checked fresh by their own tests).
      'libs/schemas/src/wire.generated.ts',
      'test/medium/openapi/roost-api.d.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Nest providers and port implementations are `async` by contract even when one body has no await.
      '@typescript-eslint/require-await': 'off',
      // A callback declared before the value it closes over is assigned (a timer, an unsubscribe).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false },
      ],
    },
  },
  {
    // Tests, the black-box conformance suite and the chaos harness read operators' JSON as untyped
    // data on purpose (checking its shape is their job), and tests hand jest methods to `expect`.
    files: ['test/**/*.ts', '**/*.spec.ts', 'conformance/**/*.ts', 'chaos/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
    },
  },
);
