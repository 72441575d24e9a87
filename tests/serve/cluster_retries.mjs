// Many chat requests through the HAProxy of a Synapse cluster with the official openai client and
// its own retries (run by tests/cli/test_cluster.sh while it kills a node).
// usage: node cluster_retries.mjs BASE_URL MODEL QUESTION COUNT CONCURRENCY OUT.jsonl
// Writes one line per request as it finishes: {"i", "sent_us", "ok", "text", "node", "error"}
// (sent_us: when its first attempt started, in microseconds since the epoch, the clock of bash's
// EPOCHREALTIME; node: the X-Synapse-Node header of the answer). Exit 0 once all have finished.
import fs from "node:fs";
import OpenAI from "openai";

const [baseURL, model, question, countArg, concurrencyArg, outPath] = process.argv.slice(2);
const count = Number(countArg), concurrency = Number(concurrencyArg);
// Retries with the client's backoff; a per-attempt timeout so that nothing can hang.
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 5, timeout: 20_000 });
const out = fs.openSync(outPath, "w");
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);

async function one(i) {
  const sent_us = nowUs();
  try {
    const { data, response } = await client.chat.completions
      .create({ model, messages: [{ role: "user", content: question }], temperature: 0, max_tokens: 8 })
      .withResponse();
    return { i, sent_us, ok: true, text: data.choices[0].message.content, node: response.headers.get("x-synapse-node") };
  } catch (e) {
    return { i, sent_us, ok: false, error: String(e.message ?? e) };
  }
}

let next = 0;
async function worker() {
  while (next < count) {
    const result = await one(next++);
    fs.writeSync(out, JSON.stringify(result) + "\n");
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
fs.closeSync(out);
