/** The tiers (STYLE.md): small beside the code, medium on real Postgres/Redis, e2e with processes. */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
    sourceMaps: 'inline',
  },
];
const moduleNameMapper = {
  '^#(domain|config|db|schemas|http|core|bus|jobs|metrics|client|mcp)$': '<rootDir>/libs/$1/src',
  '^#(api|gateway|worker|roost)$': '<rootDir>/apps/$1/src',
};
const base = { transform: { '^.+\\.ts$': swc }, moduleNameMapper, testEnvironment: 'node' };

module.exports = {
  projects: [
    {
      ...base,
      displayName: 'small',
      testMatch: ['<rootDir>/{apps,libs,chaos}/**/*.spec.ts', '<rootDir>/test/architecture/*.spec.ts'],
    },
    {
      ...base,
      displayName: 'medium',
      testMatch: ['<rootDir>/test/medium/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts.ts'],
    },
    {
      ...base,
      displayName: 'medium-pglite',
      testMatch: ['<rootDir>/test/medium/protocol/**/*.test.ts'],
      setupFiles: ['<rootDir>/test/support/use-pglite.ts'],
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts.ts'],
    },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts-e2e.ts'],
    },
    {
      ...base,
      displayName: 'browser',
      testMatch: ['<rootDir>/test/browser/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts-e2e.ts'],
    },
    {
      ...base,
      displayName: 'deploy',
      testMatch: ['<rootDir>/test/deploy/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/deploy/image'],
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts.ts'],
    },
    // The built image in Docker (test/deploy/image*.test.ts): only with ROOST_TEST_IMAGE naming
    // it (.ci/docker.sh builds it and runs this project); `--selectProjects image` without it fails.
    ...(process.env.ROOST_TEST_IMAGE
      ? [
          {
            ...base,
            displayName: 'image',
            testMatch: ['<rootDir>/test/deploy/image*.test.ts'],
            setupFilesAfterEnv: ['<rootDir>/test/support/timeouts-e2e.ts'],
          },
        ]
      : []),
  ],
};
