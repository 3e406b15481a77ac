// `testTimeout` inside a jest `projects` entry is ignored; tiers set theirs here.
const seconds = Number(process.env.ROOST_TEST_TIMEOUT_S ?? 0);
jest.setTimeout((seconds > 0 ? seconds : 60) * 1000);
