// The medium protocol suite runs a second time against the embedded default (PGlite).
process.env.ROOST_TEST_BACKEND = 'pglite';
