// The agent clients against `synapse serve` on the tiny random-weight model (run by
// tests/cli/test_serve_agents.sh): the openai client, LangChain's ChatOpenAI and the AI SDK with its
// OpenAI-compatible provider, each talking as it does to OpenAI. The model writes gibberish, so
// these check the protocol, not the words: every request is accepted, the reply has the shape the
// client expects, and a streamed reply at temperature 0 carries exactly the non-streamed text.
// usage: node agents.mjs BASE_URL. Prints "ok: ..." / "FAIL: ..." lines; exit 1 on a failure.
import OpenAI from "openai";
import { ChatOpenAI } from "@langchain/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText, tool } from "ai";
import { z } from "zod";
import { check, attempt, failures } from "./check.mjs";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
const greedy = { model: "tiny", temperature: 0, max_tokens: 12 };
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const ask = [{ role: "user", content: "What is the weather in Paris?" }];

// Joins a streamed chat reply as the client sees it: content, and calls by index.
async function joinChat(stream) {
  let content = "", role = null, finish = null, chunks = 0;
  const calls = [];
  for await (const chunk of stream) {
    chunks++;
    const choice = chunk.choices[0];
    if (!choice) continue;
    role ??= choice.delta.role ?? null;
    content += choice.delta.content ?? "";
    for (const tc of choice.delta.tool_calls ?? []) {
      calls[tc.index] ??= { id: tc.id, name: tc.function?.name, arguments: "" };
      calls[tc.index].arguments += tc.function?.arguments ?? "";
    }
    finish = choice.finish_reason ?? finish;
  }
  return { content, role, finish, chunks, calls };
}

await attempt("openai: chat", async () => {
  const chat = await client.chat.completions.create({ ...greedy, messages: ask });
  const text = chat.choices[0].message.content;
  check("openai: chat, non-streamed: an assistant message with text", chat.choices[0].message.role ===
        "assistant" && typeof text === "string" && text.length > 0, JSON.stringify(chat.choices[0]));
  const s = await joinChat(await client.chat.completions.create({ ...greedy, messages: ask, stream: true }));
  check("openai: chat, streamed: the role first, the same text, the same finish_reason",
        s.role === "assistant" && s.content === text && s.finish === chat.choices[0].finish_reason &&
        s.chunks > 2, JSON.stringify(s));
});

await attempt("openai: tools offered", async () => {
  const req = { ...greedy, messages: ask, tools: [weather] };
  const chat = await client.chat.completions.create(req);
  const msg = chat.choices[0].message;
  // Whatever the model writes: text, or calls the client can read.
  const readable = (msg.tool_calls ?? []).every((c) => c.type === "function" && c.id &&
                                                 typeof c.function.arguments === "string");
  check("openai: tools offered, non-streamed: a 200 with text or readable calls",
        (typeof msg.content === "string" || msg.tool_calls?.length > 0) && readable &&
        ["stop", "length", "tool_calls"].includes(chat.choices[0].finish_reason), JSON.stringify(msg));
  const s = await joinChat(await client.chat.completions.create({ ...req, stream: true }));
  check("openai: tools offered, streamed: the same reply", s.content === (msg.content ?? "") &&
        s.calls.length === (msg.tool_calls?.length ?? 0) && s.finish === chat.choices[0].finish_reason,
        JSON.stringify(s));
});

// The tool-result turns need the chat template to render role "tool" (the Jinja engine of issue 24).
// The call id is 9 alphanumerics, as the ids synapse makes for Mistral's templates, which refuse
// any other.
await attempt("openai: a tool-result turn (needs the template engine)", async () => {
  const chat = await client.chat.completions.create({
    ...greedy, tools: [weather],
    messages: [...ask,
               { role: "assistant", content: null,
                 tool_calls: [{ id: "abcDEF123", type: "function",
                                function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
               { role: "tool", tool_call_id: "abcDEF123", content: '{"temperature_c": 21}' }],
  });
  check("openai: a tool-result turn (assistant tool_calls with content null, then role tool) is answered",
        chat.choices[0].message.role === "assistant" && chat.usage.prompt_tokens > 0, JSON.stringify(chat));
});

await attempt("openai: responses (the last check needs the template engine)", async () => {
  const req = { model: "tiny", input: "Name a river.", instructions: "Be brief.", temperature: 0,
                max_output_tokens: 12 };
  const r = await client.responses.create(req);
  check("openai: responses.create: a response whose output_text is the message's text",
        r.object === "response" && r.output_text.length > 0 && r.output[0].type === "message" &&
        r.output_text === r.output[0].content[0].text, JSON.stringify(r));
  const types = [];
  let deltas = "", final = null;
  for await (const ev of await client.responses.create({ ...req, stream: true })) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
    if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
  }
  check("openai: responses.create, streamed: created first, the same text in deltas and at the end",
        types[0] === "response.created" && types.includes("response.output_text.done") &&
        deltas === r.output_text && final?.output[0]?.content[0]?.text === r.output_text,
        JSON.stringify({ types, deltas }));
  // The client's own accumulator rebuilds the response from the events and refuses any it cannot place.
  const stream = client.responses.stream(req);
  const rebuilt = await stream.finalResponse();
  check("openai: responses.stream: the accumulated response is the non-streamed one",
        rebuilt.output_text === r.output_text && rebuilt.status === r.status, JSON.stringify(rebuilt));
  const withCall = await client.responses.create({
    ...req,
    input: [{ role: "user", content: "Weather in Paris?" },
            { type: "function_call", call_id: "abcDEF123", name: "get_weather", arguments: '{"city":"Paris"}' },
            { type: "function_call_output", call_id: "abcDEF123", output: '{"temperature_c": 21}' }],
    tools: [{ type: "function", name: "get_weather", parameters: weather.function.parameters }],
  });
  check("openai: responses.create with function_call and function_call_output items is answered " +
        "(needs the template engine)",
        withCall.object === "response" && withCall.usage.input_tokens > 0, JSON.stringify(withCall));
});

await attempt("langchain", async () => {
  const model = new ChatOpenAI({ model: "tiny", apiKey: "unused", configuration: { baseURL },
                                 temperature: 0, maxTokens: 12, maxRetries: 0 });
  const reply = await model.invoke("What is the weather in Paris?");
  check("langchain: ChatOpenAI.invoke gives an AIMessage with text",
        typeof reply.content === "string" && reply.content.length > 0, JSON.stringify(reply.content));
  let streamed = "", n = 0;
  for await (const chunk of await model.stream("What is the weather in Paris?")) {
    streamed += chunk.content;
    n++;
  }
  check("langchain: ChatOpenAI.stream gives the same text in chunks", streamed === reply.content && n > 2,
        JSON.stringify(streamed));
});

await attempt("ai sdk", async () => {
  const provider = createOpenAICompatible({ name: "synapse", baseURL, apiKey: "unused" });
  const opts = { model: provider("tiny"), prompt: "What is the weather in Paris?", temperature: 0,
                 maxOutputTokens: 12, maxRetries: 0 };
  const gen = await generateText(opts);
  check("ai sdk: generateText gives text", gen.text.length > 0 &&
        ["stop", "length"].includes(gen.finishReason), JSON.stringify({ text: gen.text, f: gen.finishReason }));
  const st = streamText(opts);
  let streamed = "";
  for await (const piece of st.textStream) streamed += piece;
  check("ai sdk: streamText gives the same text", streamed === gen.text, JSON.stringify(streamed));
  const withTools = await generateText({
    ...opts,
    tools: { get_weather: tool({ description: "The weather in a city",
                                 inputSchema: z.object({ city: z.string() }) }) },
  });
  check("ai sdk: generateText with a tool offered finishes", ["stop", "length", "tool-calls"]
        .includes(withTools.finishReason), withTools.finishReason);
});

process.exit(failures() ? 1 : 0);
