const { encodeTextArray, encodeBigintArray } = require(process.argv[2] + '/libs/db/src/array-params.js');
const N = 100;
const ids = [], kinds = [], cas = [], mb = [];
for (let i = 0; i < N; i++) { ids.push(i < 50 ? '01JV3Z8W7Q4M2N6P8R0T2V4X6Y' : '01JV3Z8W7Q4M2N6P8R0T2V4X6Z'); kinds.push('to'); cas.push(1764000000000 + (i < 50 ? 0 : 1)); mb.push(1000 + i); }
for (const [name, fn] of [['text ids', () => encodeTextArray(ids)], ['text kinds', () => encodeTextArray(kinds)], ['bigint', () => encodeBigintArray(cas)]]) {
  for (let i = 0; i < 20000; i++) fn();
  const t = process.cpuUsage(); for (let i = 0; i < 100000; i++) fn(); const u = process.cpuUsage(t); console.log(name, ((u.user + u.system) / 100000).toFixed(2));
}
