// Forced output against `synapse serve` on the tiny random-weight model (run by
// tests/cli/test_serve_agents.sh): when the client forces a JSON shape or a tool call, the reply is
// valid every time, though the model's own text is gibberish. Only constrained decoding can pass
// these: a json_schema reply is validated with ajv under three seeds at temperature 1, a forced
// call's arguments against the tool's parameters under three seeds at temperature 0.8, streamed
// and not; the clients' own structured helpers (openai parse() with zod, LangChain
// withStructuredOutput and bindTools with tool_choice "any", the AI SDK's generateObject and
// toolChoice "required") must succeed; a GBNF grammar forcing two calls in the model's syntax must
// come back as the same calls whole, streamed (through the client's accumulators) and in
// /v1/responses' events.
// Every check here needs constrained decoding wired into the server (issue 24).
// usage: node structured.mjs BASE_URL [SYNTAX]. Prints "ok: ..." / "FAIL: ..." lines; exit 1 on a failure.
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { ChatOpenAI } from "@langchain/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateObject, generateText, tool } from "ai";
import { z } from "zod";
import Ajv from "ajv";
import { check, attempt, failures } from "./check.mjs";

// SYNTAX: the call syntax of the server's chat template (hermes, llama3 or mistral).
const [baseURL, syntax = "hermes"] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: false });
const seeds = [1, 2, 3];
const parseJSON = (text) => {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
};

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 20 },
    age: { type: "integer", minimum: 0, maximum: 150 },
    tags: { type: "array", items: { type: "string", maxLength: 10 }, maxItems: 3 },
  },
  required: ["name", "age", "tags"],
  additionalProperties: false,
};
const weatherParams = {
  type: "object",
  properties: { city: { type: "string", maxLength: 30 }, unit: { enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const weather = { type: "function", function: { name: "get_weather", description: "The weather in a city",
                                                 parameters: weatherParams } };
const timeTool = { type: "function", function: { name: "get_time", description: "The time in a zone",
                                                  parameters: { type: "object", properties: {
                                                    zone: { type: "string", maxLength: 20 } },
                                                    required: ["zone"], additionalProperties: false } } };
const ask = [{ role: "user", content: "Describe a person, then tell me the weather in Paris." }];
const validPerson = ajv.compile(person), validWeather = ajv.compile(weatherParams);

// json_object bounds no string, and random weights rarely close one: a reply may run into
// max_tokens, but it is a JSON object from its first byte and parses whenever it ends by itself.
await attempt("json_object", async () => {
  for (const seed of seeds) {
    const chat = await client.chat.completions.create({ model: "tiny", messages: ask, max_tokens: 200,
                                                        temperature: 1, seed,
                                                        response_format: { type: "json_object" } });
    const c = chat.choices[0], p = parseJSON(c.message.content);
    check(`json_object, seed ${seed}: an object that parses, or one cut by max_tokens`,
          c.message.content.startsWith("{") && (c.finish_reason === "length" ||
          (p.ok && typeof p.value === "object" && !Array.isArray(p.value))), JSON.stringify(c));
  }
});

for (const seed of seeds) {
  await attempt(`json_schema seed ${seed}`, async () => {
    const chat = await client.chat.completions.create({
      model: "tiny", messages: ask, max_tokens: 96, temperature: 1, seed,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
    });
    const p = parseJSON(chat.choices[0].message.content);
    check(`json_schema strict, seed ${seed}, temperature 1: ajv validates the reply`,
          p.ok && validPerson(p.value), JSON.stringify(chat.choices[0].message.content));
  });
}

// One forced call, checked against the schema of the tool it names (one of names).
const validTime = ajv.compile(timeTool.function.parameters);
const checkCall = (desc, call, names) => {
  const p = call ? parseJSON(call.arguments) : { ok: false };
  const valid = { get_weather: validWeather, get_time: validTime }[call?.name];
  check(desc, names.includes(call?.name) && typeof call.id === "string" && call.id.length > 0 &&
        p.ok && valid(p.value), JSON.stringify(call));
};

// One call each (parallel_tool_calls false): random weights would go on calling until max_tokens.
for (const [label, choice, names] of [["required", "required", ["get_weather", "get_time"]],
                                      ["named", { type: "function", function: { name: "get_weather" } },
                                       ["get_weather"]]]) {
  for (const seed of seeds) {
    const req = { model: "tiny", messages: ask, tools: [weather, timeTool], tool_choice: choice,
                  parallel_tool_calls: false, max_tokens: 96, temperature: 0.8, seed };
    await attempt(`tool_choice ${label} seed ${seed}`, async () => {
      const chat = await client.chat.completions.create(req);
      const c = chat.choices[0];
      const call = c.message.tool_calls?.[0];
      checkCall(`tool_choice ${label}, seed ${seed}, temperature 0.8: a ${names.join(" or ")} call whose arguments validate`,
                call && { id: call.id, name: call.function.name, arguments: call.function.arguments }, names);
      check(`... finish_reason tool_calls`, c.finish_reason === "tool_calls", c.finish_reason);
      const calls = [];
      let finish = null;
      for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
        const ch = chunk.choices[0];
        if (!ch) continue;
        for (const tc of ch.delta.tool_calls ?? []) {
          calls[tc.index] ??= { id: tc.id, name: tc.function?.name, arguments: "" };
          calls[tc.index].arguments += tc.function?.arguments ?? "";
        }
        finish = ch.finish_reason ?? finish;
      }
      checkCall(`tool_choice ${label}, seed ${seed}, streamed: the call in delta.tool_calls validates`,
                calls[0], names);
      check(`... streamed finish_reason tool_calls`, finish === "tool_calls", finish);
    });
  }
}

// llama-server's grammar field forcing text and two calls in the template's syntax (Llama 3's
// calls are the whole reply). The streamed reply must carry what the whole one carries, in
// OpenAI's chunks and in the Responses API's events, and the clients' own accumulators must
// rebuild it.
await attempt("grammar-forced calls", async () => {
  const written = {
    hermes: 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n' +
            '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>',
    llama3: '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}; ' +
            '{"name": "get_time", "parameters": {"zone": "UTC"}}',
    mistral: 'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}, ' +
             '"id": "abcDEF123"}, {"name": "get_time", "arguments": {"zone": "UTC"}, "id": "ghiJKL456"}]',
  }[syntax];
  const text = syntax === "llama3" ? null : "Sure.";
  const grammar = `root ::= ${JSON.stringify(written)}`;
  const req = { model: "tiny", messages: ask, tools: [weather, timeTool], grammar, max_tokens: 200 };
  const want = [["get_weather", { city: "Paris", unit: "c" }], ["get_time", { zone: "UTC" }]];
  const same = (calls) => calls.length === 2 && calls.every((c, i) => c.name === want[i][0] &&
    JSON.stringify(JSON.parse(c.arguments)) === JSON.stringify(want[i][1]) && c.id);
  const chat = await client.chat.completions.create(req);
  const m = chat.choices[0].message;
  check("grammar-forced calls: message.tool_calls and the text before them",
        m.content === text && same((m.tool_calls ?? []).map((c) => ({ id: c.id, ...c.function }))) &&
        chat.choices[0].finish_reason === "tool_calls", JSON.stringify(chat.choices[0]));
  const fin = await client.chat.completions.stream(req).finalChatCompletion();
  const fm = fin.choices[0].message;
  check("grammar-forced calls, streamed: the client's accumulator rebuilds content and both calls",
        (fm.content ?? null) === text && same((fm.tool_calls ?? []).map((c) => ({ id: c.id, ...c.function }))) &&
        fin.choices[0].finish_reason === "tool_calls", JSON.stringify(fin.choices[0]));
  const rreq = { model: "tiny", input: "Weather in Paris?", grammar, max_output_tokens: 200,
                 tools: [weather, timeTool].map((t) => ({ type: "function", ...t.function })) };
  const r = await client.responses.stream(rreq).finalResponse();
  const fcs = r.output.filter((o) => o.type === "function_call");
  check("grammar-forced calls, /v1/responses streamed: a message item, then two function_call items",
        (text ? r.output[0]?.type === "message" && r.output_text === text : r.output_text === "") &&
        same(fcs), JSON.stringify(r.output));
});

// zod's .max() counts UTF-16 code units, JSON Schema's maxLength code points: a string of astral
// characters (emoji, rare CJK) within the schema's bound can still be too long for zod.
await attempt("openai parse() with zod (string lengths as zod counts them)", async () => {
  const Person = z.object({ name: z.string().max(20), age: z.number().int().min(0).max(150),
                            tags: z.array(z.string().max(10)).max(3) });
  const r = await client.chat.completions.parse({ model: "tiny", messages: ask, max_tokens: 96,
                                                  response_format: zodResponseFormat(Person, "person") });
  check("openai: chat.completions.parse with a zod schema gives the parsed object",
        Person.safeParse(r.choices[0].message.parsed).success, JSON.stringify(r.choices[0].message));
});

await attempt("responses with a required function call", async () => {
  const tools = [{ type: "function", name: "get_weather", parameters: weatherParams, strict: true }];
  const req = { model: "tiny", input: "Weather in Paris?", tools, tool_choice: "required",
                parallel_tool_calls: false, max_output_tokens: 96, temperature: 0.8, seed: 1 };
  const r = await client.responses.create(req);
  const fc = r.output.find((o) => o.type === "function_call");
  checkCall("responses: tool_choice required gives a function_call item that validates", fc, ["get_weather"]);
  let done = null;
  for await (const ev of await client.responses.create({ ...req, stream: true }))
    if (ev.type === "response.function_call_arguments.done") done ??= ev;
  check("responses, streamed: function_call_arguments.done carries arguments that validate",
        done && parseJSON(done.arguments).ok && validWeather(JSON.parse(done.arguments)), JSON.stringify(done));
});

await attempt("langchain", async () => {
  const model = new ChatOpenAI({ model: "tiny", apiKey: "unused", configuration: { baseURL },
                                 temperature: 0.8, maxTokens: 96, maxRetries: 0 });
  const Person = z.object({ name: z.string().max(20), age: z.number().int().min(0).max(150) });
  const structured = await model.withStructuredOutput(Person, { name: "person" })
    .invoke("Describe a person.");
  check("langchain: withStructuredOutput(zod) gives an object of the schema",
        Person.safeParse(structured).success, JSON.stringify(structured));
});

await attempt("langchain bindTools", async () => {
  const model = new ChatOpenAI({ model: "tiny", apiKey: "unused", configuration: { baseURL },
                                 temperature: 0.8, maxTokens: 96, maxRetries: 0 });
  const bound = model.bindTools([weather], { tool_choice: "any" });
  const msg = await bound.invoke("Weather in Paris?");
  const call = msg.tool_calls?.[0];
  check("langchain: bindTools with tool_choice any gives a get_weather call that validates",
        call?.name === "get_weather" && validWeather(call.args), JSON.stringify(msg.tool_calls));
});

await attempt("ai sdk", async () => {
  const provider = createOpenAICompatible({ name: "synapse", baseURL, apiKey: "unused",
                                            supportsStructuredOutputs: true });
  const Person = z.object({ name: z.string().max(20), age: z.number().int().min(0).max(150) });
  const obj = await generateObject({ model: provider("tiny"), schema: Person, prompt: "Describe a person.",
                                     temperature: 0.8, maxOutputTokens: 96, maxRetries: 0 });
  check("ai sdk: generateObject gives an object of the schema", Person.safeParse(obj.object).success,
        JSON.stringify(obj.object));
});

await attempt("ai sdk toolChoice required", async () => {
  const provider = createOpenAICompatible({ name: "synapse", baseURL, apiKey: "unused" });
  const gen = await generateText({
    model: provider("tiny"), prompt: "Weather in Paris?", temperature: 0.8, maxOutputTokens: 96,
    maxRetries: 0, toolChoice: "required",
    tools: { get_weather: tool({ description: "The weather in a city",
                                 inputSchema: z.object({ city: z.string().max(30), unit: z.enum(["c", "f"]) }) }) },
  });
  const call = gen.toolCalls[0];
  check("ai sdk: generateText with toolChoice required gives a get_weather call that validates",
        call?.toolName === "get_weather" && validWeather(call.input), JSON.stringify(gen.toolCalls));
});

process.exit(failures() ? 1 : 0);
