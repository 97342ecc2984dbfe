// The Node client of bench_proxy.py: POSTs chat completions with Node's own fetch (no
// package needed) and prints the latency of each call, in microseconds, as JSON.
//
//   node proxy_client.mjs BASE_URL CALLS CONCURRENCY [DISTINCT]
//
// Call i asks "call i" (i modulo DISTINCT when given: requests that repeat), CONCURRENCY
// workers at once, each call timed from the request to the whole body read.
const [base, callsText, workersText, distinctText] = process.argv.slice(2);
const calls = Number(callsText);
const workers = Number(workersText);
const distinct = distinctText ? Number(distinctText) : calls;
const latencies = new Array(calls);
let next = 0;

async function one(i) {
  const body = JSON.stringify({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: `call ${i % distinct}` }],
  });
  const start = performance.now();
  const response = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
    body,
  });
  await response.text();
  if (response.status !== 200) throw new Error(`call ${i}: status ${response.status}`);
  latencies[i] = Math.round((performance.now() - start) * 1000);
}

async function worker() {
  while (next < calls) {
    const i = next++;
    await one(i);
  }
}

const started = performance.now();
await Promise.all(Array.from({ length: workers }, worker));
const seconds = (performance.now() - started) / 1000;
console.log(JSON.stringify({ latencies, seconds }));
