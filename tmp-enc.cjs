const { encodeTextArray, encodeBigintArray } = require(process.argv[2] + '/libs/db/src/array-params.js');
const N = 100;
const ids = [], kinds = [], cas = [], mb = [], seqs = [];
for (let i = 0; i < N; i++) { ids.push(i < 50 ? '01JV3Z8W7Q4M2N6P8R0T2V4X6Y' : '01JV3Z8W7Q4M2N6P8R0T2V4X6Z'); kinds.push('to'); cas.push(1764000000000 + (i < 50 ? 0 : 1)); mb.push(1000 + i); seqs.push(5000 + i); }
function run() { encodeBigintArray(mb); encodeBigintArray(seqs); encodeTextArray(ids); encodeBigintArray(cas); encodeTextArray(kinds); }
for (let i = 0; i < 20000; i++) run();
for (let r = 0; r < 5; r++) { const t = process.cpuUsage(); for (let i = 0; i < 50000; i++) run(); const u = process.cpuUsage(t); console.log(((u.user + u.system) / 50000).toFixed(2), 'us per 100-entry encoding'); }
