// bench-serve.mjs: streaming load against a running `synapse serve` (or any OpenAI-compatible
// server), with a bounded count: CLIENTS clients, each sending REQUESTS streamed completions one
// after another. Node's own http module; no packages.
//
// usage: node scripts/bench-serve.mjs BASE_URL CLIENTS REQUESTS MAX_TOKENS [PROMPT]
// Prints one JSON object: {clients, requests, max_tokens, wall_s, tokens, agg_tok_s,
//   ttft_ms_median, stream_tok_s_median}: aggregate = all tokens / wall time; ttft = request sent ->
//   first text chunk; stream tok/s = (tokens - 1) / (last chunk - first chunk) of one request.
import http from "node:http";

const [base, clientsArg, requestsArg, maxTokensArg, promptArg] = process.argv.slice(2);
const clients = Number(clientsArg), requests = Number(requestsArg), maxTokens = Number(maxTokensArg);
const prompt = promptArg ?? "The capital of France is";
if (!base || !(clients >= 1) || !(requests >= 1) || !(maxTokens >= 2)) {
  console.error("usage: node bench-serve.mjs BASE_URL CLIENTS REQUESTS MAX_TOKENS [PROMPT]");
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true });
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : 0;
};

// One streamed completion through node:http (fetch's stream machinery costs ~0.7 ms of CPU per
// chunk, which on a 2-core machine comes out of the server's compute): resolves {tokens, ttft,
// first, last} (times in ms).
function streamOnce(seed) {
  const body = JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0.8, seed, stream: true,
                                stream_options: { include_usage: true } });
  return new Promise((resolve, reject) => {
    const sent = performance.now();
    const req = http.request(`${base}/v1/completions`, {
      method: "POST", agent, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) },
    }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
      res.setEncoding("utf8");
      let buffer = "", first = 0, last = 0, tokens = 0;
      res.on("data", (text) => {
        buffer += text;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (event.includes('"usage":{')) tokens = JSON.parse(event.slice(6)).usage.completion_tokens;
          else if (event.includes('"text":"') && !event.includes('"text":""')) {
            last = performance.now();
            if (!first) first = last;
          }
        }
      });
      res.on("end", () => resolve({ tokens, ttft: first - sent, first, last }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

const results = [];
const start = performance.now();
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  for (let i = 0; i < requests; i++) results.push(await streamOnce(1000 * c + i));
}));
const wall = (performance.now() - start) / 1000;
const tokens = results.reduce((n, r) => n + r.tokens, 0);
console.log(JSON.stringify({
  clients, requests: results.length, max_tokens: maxTokens, wall_s: +wall.toFixed(3), tokens,
  agg_tok_s: +(tokens / wall).toFixed(1),
  ttft_ms_median: +median(results.map((r) => r.ttft)).toFixed(1),
  stream_tok_s_median: +median(results.filter((r) => r.last > r.first)
    .map((r) => (r.tokens - 1) / ((r.last - r.first) / 1000))).toFixed(1),
}));
