// The official openai client against `synapse serve` (run by tests/cli/test_serve_clients.sh).
// usage: node openai_client.mjs BASE_URL EXPECTED.json
// EXPECTED.json: {"question", "chat_text", "prompt", "completion_text", "max_tokens"}: greedy texts
// from `synapse run` for the same inputs. Prints "ok: ..." / "FAIL: ..." lines; exit 1 on a failure.
import fs from "node:fs";
import OpenAI from "openai";
import { check, failures } from "./check.mjs";

const [baseURL, expectedPath] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectedPath, "utf8"));
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
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

// n choices: each its own sequence over the one prompt.
const three = await client.chat.completions.create({ model: "tiny", messages, ...greedy, n: 3 });
check("chat, n = 3: choices 0..2, each the greedy text with its finish_reason", three.choices.length === 3 &&
      three.choices.every((c, i) => c.index === i && c.message.content === want.chat_text && c.finish_reason === "length"),
      JSON.stringify(three.choices));
check("chat, n = 3: usage counts the prompt once, the tokens of every choice",
      three.usage.prompt_tokens === chat.usage.prompt_tokens && three.usage.completion_tokens === 3 * want.max_tokens,
      JSON.stringify(three.usage));

// A stream of n choices: per index the joined pieces, the finish_reason chunks, the role chunks.
const streamChoices = async (create, params, piece) => {
  const got = { texts: [], finishes: [], roles: [], usage: null, bad: 0 };
  for await (const chunk of await create({ ...params, stream: true, stream_options: { include_usage: true } })) {
    if (chunk.usage) got.usage = chunk.usage;
    if (chunk.choices.length > 1) got.bad++; /* one choice per chunk */
    for (const c of chunk.choices) {
      got.texts[c.index] = (got.texts[c.index] ?? "") + (piece(c) ?? "");
      if (c.finish_reason) got.finishes[c.index] = (got.finishes[c.index] ?? 0) + 1;
      if (c.delta?.role) got.roles[c.index] = (got.roles[c.index] ?? 0) + 1;
    }
  }
  return got;
};
const chatCreate = (p) => client.chat.completions.create(p), compCreate = (p) => client.completions.create(p);
const s3 = await streamChoices(chatCreate, { model: "tiny", messages, ...greedy, n: 3 }, (c) => c.delta.content);
check("chat, streaming, n = 3: each index's pieces join to the greedy text",
      s3.texts.length === 3 && s3.texts.every((t) => t === want.chat_text), JSON.stringify(s3.texts));
check("chat, streaming, n = 3: one role chunk and one finish_reason chunk per index, one choice per chunk",
      [0, 1, 2].every((i) => s3.roles[i] === 1 && s3.finishes[i] === 1) && s3.bad === 0,
      JSON.stringify([s3.roles, s3.finishes, s3.bad]));
check("chat, streaming, n = 3: usage once, the sum of the choices",
      s3.usage && s3.usage.completion_tokens === 3 * want.max_tokens, JSON.stringify(s3.usage));

const sampled = { model: "tiny", prompt: want.prompt, temperature: 1.0, max_tokens: 16, seed: 77, n: 3 };
const r1 = await streamChoices(compCreate, sampled, (c) => c.text);
const r2 = await streamChoices(compCreate, sampled, (c) => c.text);
const one = await client.completions.create({ ...sampled, n: 1 });
check("completions, streaming, n = 3 with a seed: the same three texts again", r1.texts.length === 3 &&
      r1.texts.every((t, i) => t === r2.texts[i]) && r1.finishes.every((f) => f === 1), JSON.stringify([r1.texts, r2.texts]));
check("... the choices differ (seed + index each)", new Set(r1.texts).size === 3, JSON.stringify(r1.texts));
check("... choice 0 is the n = 1 reply of the same seed", r1.texts[0] === one.choices[0].text,
      JSON.stringify([r1.texts[0], one.choices[0].text]));

// OpenAI's penalties, over the reply's own tokens: greedy without them repeats a token; a large
// frequency or presence penalty leaves every token distinct; a negative one repeats more.
const tokensOf = async (extra) => (await client.chat.completions.create(
  { model: "tiny", messages, ...greedy, logprobs: true, ...extra })).choices[0].logprobs.content.map((t) => t.token);
const mostRepeated = (tokens) => Math.max(...Object.values(tokens.reduce((n, t) => ({ ...n, [t]: (n[t] ?? 0) + 1 }), {})));
const plainTokens = await tokensOf({});
const freqTokens = await tokensOf({ frequency_penalty: 2 }), presTokens = await tokensOf({ presence_penalty: 2 });
const negTokens = await tokensOf({ frequency_penalty: -2 });
check("greedy without penalties repeats a token", mostRepeated(plainTokens) >= 2, JSON.stringify(plainTokens));
check("frequency_penalty 2: no token twice", mostRepeated(freqTokens) === 1 && freqTokens.length === want.max_tokens,
      JSON.stringify(freqTokens));
check("presence_penalty 2: no token twice", mostRepeated(presTokens) === 1, JSON.stringify(presTokens));
check("frequency_penalty -2: repeats more than without", mostRepeated(negTokens) > mostRepeated(plainTokens),
      JSON.stringify(negTokens));

try {
  await client.chat.completions.create({ model: "tiny", messages, n: 9 });
  check("n = 9 is refused", false);
} catch (e) {
  check("n = 9 is refused with a 400 the client surfaces", e instanceof OpenAI.BadRequestError && /\bn\b/.test(e.message), e.message);
}
try {
  await client.chat.completions.create({ model: "no-such-model", messages });
  check("an unknown model is refused", false);
} catch (e) {
  check("an unknown model is a 404 the client surfaces", e instanceof OpenAI.NotFoundError, String(e));
}
console.log(`${failures() ? "FAILED" : "all ok"}`);
process.exit(failures() ? 1 : 0);
