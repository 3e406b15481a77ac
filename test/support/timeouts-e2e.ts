// e2e files start and kill whole processes: they get longer than the medium tier.
jest.setTimeout(180_000);
