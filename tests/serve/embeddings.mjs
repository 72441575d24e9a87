// The official openai client's embeddings.create against `synapse serve` (run by
// tests/cli/test_serve_clients.sh). usage: node embeddings.mjs BASE_URL N_EMBD
// The client asks for base64 unless told otherwise and decodes it itself, so its default path and
// encoding_format "float" (JSON numbers) must give the same floats. Prints "ok: ..." / "FAIL: ..."
// lines; exit 1 on a failure.
import OpenAI from "openai";
import { check, failures } from "./check.mjs";

const [baseURL, nEmbdArg] = process.argv.slice(2);
const nEmbd = Number(nEmbdArg);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
// float32 precision: what a float32 vector survives through JSON and base64
const near = (a, b, tol) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tol);

const one = await client.embeddings.create({ model: "tiny", input: "The river Rhine" });
const v = one.data[0].embedding;
check("a string: one embedding of the model's width", one.object === "list" && one.data.length === 1 &&
      one.data[0].object === "embedding" && one.data[0].index === 0 && v.length === nEmbd,
      JSON.stringify({ n: one.data.length, len: v.length }));
check("unit length", Math.abs(norm(v) - 1) < 1e-5, String(norm(v)));
check("usage counts the prompt tokens", one.model === "tiny" && one.usage.prompt_tokens > 0 &&
      one.usage.total_tokens === one.usage.prompt_tokens, JSON.stringify(one.usage));

const asFloat = await client.embeddings.create({ model: "tiny", input: "The river Rhine", encoding_format: "float" });
check("encoding_format float equals the client's decoded base64, value for value",
      same(asFloat.data[0].embedding, v));
const raw = await client.embeddings.create({ model: "tiny", input: "The river Rhine", encoding_format: "base64" });
const b64 = raw.data[0].embedding;
const bytes = Buffer.from(b64, "base64");
const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(4 * i));
check("base64: little-endian float32 bytes of the same vector", typeof b64 === "string" &&
      bytes.length === 4 * nEmbd && same(decoded, asFloat.data[0].embedding));

const texts = ["The river Rhine", "A quiet harbour at night", "The river Rhine", "x"];
const many = await client.embeddings.create({ model: "tiny", input: texts, encoding_format: "float" });
const vs = many.data.map((d) => d.embedding);
check("an array of strings: one embedding each, in order", many.data.length === texts.length &&
      many.data.every((d, i) => d.index === i && d.embedding.length === nEmbd));
check("in a batch, the same text gives the same vector as alone", same(vs[0], v) && same(vs[2], v));
check("different texts give different vectors", !near(vs[0], vs[1], 1e-3) && !near(vs[1], vs[3], 1e-3));
check("usage sums every input", many.usage.prompt_tokens > one.usage.prompt_tokens * 2,
      JSON.stringify(many.usage));

const tok = await fetch(baseURL.replace(/\/v1$/, "") + "/tokenize", {
  method: "POST", body: JSON.stringify({ content: "The river Rhine", add_special: true }) });
const ids = (await tok.json()).tokens;
const byIds = await client.embeddings.create({ model: "tiny", input: ids, encoding_format: "float" });
check("a token array: the vector of the text it tokenizes to", same(byIds.data[0].embedding, v));
const idArrays = await client.embeddings.create({ model: "tiny", input: [ids, ids.slice(0, 2)] });
check("an array of token arrays", idArrays.data.length === 2 && same(idArrays.data[0].embedding, v) &&
      !near(idArrays.data[1].embedding, v, 1e-3));

const d = 8;
const cut = await client.embeddings.create({ model: "tiny", input: "The river Rhine", dimensions: d });
const head = v.slice(0, d), headNorm = norm(head);
check(`dimensions ${d}: the first ${d} values at unit length again`, cut.data[0].embedding.length === d &&
      Math.abs(norm(cut.data[0].embedding) - 1) < 1e-5 &&
      near(cut.data[0].embedding, head.map((x) => x / headNorm), 1e-6), JSON.stringify(cut.data[0].embedding));

for (const [desc, body] of [["an empty array", { input: [] }], ["an empty string", { input: "" }],
                            [`dimensions ${nEmbd + 1}`, { input: "a", dimensions: nEmbd + 1 }]]) {
  try {
    await client.embeddings.create({ model: "tiny", ...body });
    check(`${desc} is refused`, false);
  } catch (e) {
    check(`${desc} is refused with a 400 the client surfaces`, e instanceof OpenAI.BadRequestError, e.message);
  }
}

process.exit(failures() ? 1 : 0);
