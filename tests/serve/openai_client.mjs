// The official openai client against `synapse serve` (run by tests/cli/test_serve_clients.sh).
// usage: node openai_client.mjs BASE_URL EXPECTED.json
// EXPECTED.json: {"question", "chat_text", "prompt", "completion_text", "max_tokens"}: greedy texts
// from `synapse run` for the same inputs. Prints "ok: ..." / "FAIL: ..." lines; exit 1 on a failure.
import fs from "node:fs";
import OpenAI from "openai";

const [baseURL, expectedPath] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectedPath, "utf8"));
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
let failed = 0;
const check = (desc, cond, detail = "") => {
  console.log(`${cond ? "ok" : "FAIL"}: ${desc}${cond ? "" : " " + detail}`);
  if (!cond) failed++;
};
const messages = [{ role: "user", content: want.question }];
const greedy = { temperature: 0, max_tokens: want.max_tokens };

const chat = await client.chat.completions.create({ model: "tiny", messages, ...greedy });
check("chat, non-streaming: synapse run's greedy text", chat.choices[0].message.content === want.chat_text,
      JSON.stringify(chat.choices[0].message.content));
check("chat: usage and finish_reason", chat.usage.completion_tokens === want.max_tokens &&
      chat.choices[0].finish_reason === "length", JSON.stringify(chat.usage));

let streamed = "", chunks = 0, finish = null, usage = null;
const stream = await client.chat.completions.create({ model: "tiny", messages, ...greedy, stream: true,
                                                      stream_options: { include_usage: true } });
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  streamed += choice.delta.content ?? "";
  if (choice.finish_reason) finish = choice.finish_reason;
}
check("chat, streaming: the same text", streamed === want.chat_text, JSON.stringify(streamed));
check("chat, streaming: several chunks, finish_reason, usage", chunks > 2 && finish === "length" &&
      usage && usage.completion_tokens === want.max_tokens, `${chunks} ${finish} ${JSON.stringify(usage)}`);

const comp = await client.completions.create({ model: "tiny", prompt: want.prompt, ...greedy });
check("completion, non-streaming: synapse run's greedy text", comp.choices[0].text === want.completion_text,
      JSON.stringify(comp.choices[0].text));
let compStreamed = "";
for await (const chunk of await client.completions.create({ model: "tiny", prompt: want.prompt, ...greedy, stream: true }))
  compStreamed += chunk.choices[0]?.text ?? "";
check("completion, streaming: the same text", compStreamed === want.completion_text, JSON.stringify(compStreamed));

const seeded = { model: "tiny", messages, temperature: 1.0, max_tokens: 16, seed: 1234 };
const a = await client.chat.completions.create(seeded), b = await client.chat.completions.create(seeded);
check("a seed reproduces the sampled text", a.choices[0].message.content === b.choices[0].message.content);

const models = await client.models.list();
check("models.list has the alias", models.data.length === 1 && models.data[0].id === "tiny");

try {
  await client.chat.completions.create({ model: "tiny", messages, n: 2 });
  check("n = 2 is refused", false);
} catch (e) {
  check("n = 2 is refused with a 400 the client surfaces", e instanceof OpenAI.BadRequestError && /\bn\b/.test(e.message), e.message);
}
try {
  await client.chat.completions.create({ model: "no-such-model", messages });
  check("an unknown model is refused", false);
} catch (e) {
  check("an unknown model is a 404 the client surfaces", e instanceof OpenAI.NotFoundError, String(e));
}
console.log(`${failed ? "FAILED" : "all ok"}`);
process.exit(failed ? 1 : 0);
