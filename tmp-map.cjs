const m = new Map(); for (let i = 1; i <= 2000; i++) m.set(i, { agent_id: i, last_seq: 0, last_created_at: 0 });
const batches = Array.from({ length: 40 }, (_, g) => Array.from({ length: 100 }, (_, i) => ({ agent_id: ((g * 50 + i) % 2000) + 1, last_seq: 1, last_created_at: 2 })));
function ds(states) { for (const s of states) { m.delete(s.agent_id); m.set(s.agent_id, s); } for (const id of m.keys()) { if (m.size <= 100000) return; m.delete(id); } }
function so(states) { for (const s of states) m.set(s.agent_id, s); }
for (const [n, f] of [['delete+set', ds], ['set', so], ['delete+set', ds], ['set', so]]) { for (let i = 0; i < 20000; i++) f(batches[i % 40]); const t = process.cpuUsage(); for (let i = 0; i < 100000; i++) f(batches[i % 40]); const u = process.cpuUsage(t); console.log(n, ((u.user + u.system) / 100000).toFixed(2), 'us/100 states'); }
