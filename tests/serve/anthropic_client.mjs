// Anthropic's Messages API as the official @anthropic-ai/sdk sees `synapse serve` on the tiny
// random-weight model (run by tests/cli/test_serve_anthropic.sh). The model writes gibberish, so
// these check the protocol: a whole reply's shape, a streamed reply's events in order carrying
// exactly the whole reply's text at temperature 0, a forced tool_use whose input is an instance of
// the tool's input_schema (constrained decoding), a tool_result turn rendered as the chat template
// renders the same conversation in OpenAI's shape, count_tokens, and the x-api-key.
// usage: node anthropic_client.mjs BASE_URL API_KEY (the server runs with --api-key API_KEY).
// Prints "ok: ..." / "FAIL: ..." lines; exit 1 on a failure.
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";
import { check, attempt, failures } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: false });
const post = async (path, body) => {
  const r = await fetch(baseURL + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
  });
  return r.json();
};

const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const greedy = { model: "tiny", max_tokens: 12, temperature: 0, system: "Be brief.", messages: ask };
const weather = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", maxLength: 30 }, unit: { enum: ["c", "f"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  },
};
const validInput = ajv.compile(weather.input_schema);

let whole = null;
await attempt("a text reply", async () => {
  whole = await client.messages.create(greedy);
  const block = whole.content[0];
  check("a text reply: a message with a text block, a stop_reason and usage",
        whole.type === "message" && whole.role === "assistant" && whole.id.startsWith("msg_") &&
        whole.model === "tiny" && block?.type === "text" && block.text.length > 0 &&
        ["end_turn", "max_tokens"].includes(whole.stop_reason) && whole.stop_sequence === null &&
        whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0 &&
        whole.usage.output_tokens <= 12, JSON.stringify(whole));
});

await attempt("streaming", async () => {
  const stream = await client.messages.create({ ...greedy, stream: true });
  const types = [];
  let text = "", stop = null, outputTokens = -1, inputTokens = -1, indexes = true;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "message_start") inputTokens = ev.message.usage.input_tokens;
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type.startsWith("content_block") && ev.index !== 0) indexes = false;
    if (ev.type === "message_delta") {
      stop = ev.delta.stop_reason;
      outputTokens = ev.usage.output_tokens;
    }
  }
  const order = types.filter((t) => t !== "ping" && t !== "content_block_delta").join(",");
  check("streaming: message_start, one content block, message_delta, message_stop in order",
        types[0] === "message_start" && types.includes("content_block_delta") && indexes &&
        order === "message_start,content_block_start,content_block_stop,message_delta,message_stop",
        types.join(","));
  const block = whole.content[0];
  check("streaming: the text deltas joined are the whole reply's text; same stop_reason and usage",
        text === block.text && stop === whole.stop_reason &&
        outputTokens === whole.usage.output_tokens && inputTokens === whole.usage.input_tokens,
        JSON.stringify({ text, stop, outputTokens, inputTokens }));
  const final = await client.messages.stream(greedy).finalMessage();
  check("streaming: the client's accumulated message has the whole reply's content",
        JSON.stringify(final.content) === JSON.stringify(whole.content), JSON.stringify(final));
});

// Forced calls: the model's text is gibberish, so a valid input comes only from constrained
// decoding. One call each: random weights would go on calling until max_tokens.
let call = null;
for (const [desc, choice] of [["tool_choice tool", { type: "tool", name: "get_weather" }],
                              ["tool_choice any", { type: "any", disable_parallel_tool_use: true }]]) {
  await attempt(desc, async () => {
    const req = { model: "tiny", max_tokens: 200, temperature: 0.8, messages: ask, tools: [weather],
                  tool_choice: { disable_parallel_tool_use: true, ...choice } };
    const msg = await client.messages.create(req);
    const use = msg.content.find((b) => b.type === "tool_use");
    check(`${desc}: a tool_use block naming the tool, its input valid against input_schema`,
          use && use.name === "get_weather" && use.id.startsWith("toolu_") && validInput(use.input) &&
          msg.stop_reason === "tool_use", JSON.stringify(msg));
    call ??= use;
    const final = await client.messages.stream(req).finalMessage();
    const streamed = final.content.find((b) => b.type === "tool_use");
    check(`${desc}, streamed: the client rebuilds a valid tool_use from input_json_delta events`,
          streamed && streamed.name === "get_weather" && validInput(streamed.input) &&
          final.stop_reason === "tool_use", JSON.stringify(final));
  });
}

await attempt("a tool_result turn", async () => {
  const result = "Sunny, 21 C";
  const messages = [...ask, { role: "assistant", content: [{ type: "text", text: "Let me look." }, call] },
                    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: result }] }];
  const msg = await client.messages.create({ ...greedy, tools: [weather], messages });
  check("a tool_result turn: answered", msg.type === "message" && msg.usage.input_tokens > 0,
        JSON.stringify(msg));
  // The same conversation in OpenAI's shape, rendered by /apply-template: the same prompt. The
  // server's tool_use ids are its call ids behind "toolu_" (Mistral's are 9 letters).
  const id = call.id.replace(/^toolu_/, "");
  const openai = [{ role: "system", content: "Be brief." }, ...ask,
                  { role: "assistant", content: "Let me look.", tool_calls: [{ id, type: "function",
                    function: { name: call.name, arguments: JSON.stringify(call.input) } }] },
                  { role: "tool", tool_call_id: id, content: result }];
  const tools = [{ type: "function", function: { name: weather.name, description: weather.description,
                                                 parameters: weather.input_schema } }];
  const { prompt } = await post("/apply-template", { messages: openai, tools,
                                                     chat_template_kwargs: { enable_thinking: false } });
  const { tokens } = await post("/tokenize", { content: prompt, add_special: true });
  check("a tool_result turn: rendered as the template renders tool_calls and a tool message",
        prompt.includes(result) && prompt.includes('"city"') && tokens.length === msg.usage.input_tokens,
        `${tokens?.length} != ${msg.usage.input_tokens}: ${prompt}`);
  const count = await client.messages.countTokens({ model: "tiny", system: "Be brief.", tools: [weather],
                                                   messages });
  check("count_tokens: the tool_result turn's prompt size", count.input_tokens === tokens.length,
        JSON.stringify(count));
});

await attempt("count_tokens", async () => {
  const count = await client.messages.countTokens({ model: "tiny", system: greedy.system, messages: ask });
  check("count_tokens: the input_tokens the reply's usage reports", count.input_tokens ===
        whole.usage.input_tokens, JSON.stringify(count));
});

await attempt("the API key", async () => {
  const wrong = new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 });
  const e = await wrong.messages.create(greedy).then(() => null, (err) => err);
  check("a wrong x-api-key: 401 authentication_error", e instanceof Anthropic.AuthenticationError &&
        e.status === 401 && e.error?.error?.type === "authentication_error", String(e));
  const bearer = new Anthropic({ baseURL, apiKey: null, authToken: apiKey, maxRetries: 0 });
  const msg = await bearer.messages.create(greedy);
  check("Authorization: Bearer KEY works as well", msg.content[0]?.text === whole.content[0].text,
        JSON.stringify(msg));
});

process.exit(failures() ? 1 : 0);
