// A page on a second local origin calling `synapse serve` through the openai package's browser
// build, in Debian's headless Chromium (run by tests/cli/test_serve_cors.sh).
// usage: node cors_page.mjs PAGE_PORT CASE...   with CASE "ok|BASE_URL|API_KEY" or
// "blocked|BASE_URL|API_KEY": the page (served here on 127.0.0.1:PAGE_PORT, 0: any port) asks
// BASE_URL for a chat completion, whole and streamed; "ok" expects both to succeed, "blocked"
// expects the browser to refuse both (a CORS failure the SDK reports as a connection error).
import { chromium } from "playwright-core";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { check, failures } from "./check.mjs";

const [pagePort, ...cases] = process.argv.slice(2);

const openaiDir = join(dirname(fileURLToPath(import.meta.url)), "node_modules", "openai");
const page = `<!doctype html><title>cors</title><script type="module">
import OpenAI from "/openai/index.mjs";
window.ask = async (baseURL, apiKey, stream) => {
  const client = new OpenAI({ baseURL, apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
  const req = { model: "tiny", messages: [{ role: "user", content: "Name a river." }], max_tokens: 6, temperature: 0 };
  try {
    if (!stream) {
      const r = await client.chat.completions.create(req);
      return { ok: true, text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
    }
    let text = "", finish = null;
    for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { ok: true, text, finish };
  } catch (e) {
    return { ok: false, error: e.constructor.name + ": " + e.message };
  }
};
window.ready = true;
</script>`;

// The page and the openai package's files (ES modules, relative imports only).
const pages = createServer(async (req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (path === "/") {
    res.writeHead(200, { "Content-Type": "text/html" }).end(page);
    return;
  }
  const file = normalize(join(openaiDir, path.replace(/^\/openai\//, "")));
  if (!path.startsWith("/openai/") || !file.startsWith(openaiDir)) {
    res.writeHead(404).end();
    return;
  }
  try {
    res.writeHead(200, { "Content-Type": "text/javascript" }).end(await readFile(file));
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((resolve) => pages.listen(Number(pagePort), "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${pages.address().port}`;

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const tab = await browser.newPage();
  await tab.goto(origin + "/");
  await tab.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
  for (const c of cases) {
    const [expect, baseURL, apiKey] = c.split("|");
    check(`the page's origin ${origin} differs from the API's`, !baseURL.startsWith(origin));
    for (const stream of [false, true]) {
      const r = await tab.evaluate(([b, k, s]) => window.ask(b, k, s), [baseURL, apiKey || "none", stream]);
      const what = `${stream ? "streamed" : "whole"} chat from ${origin} to ${baseURL}${apiKey ? " (with a key)" : ""}`;
      if (expect === "ok")
        check(`${what} succeeds`, r.ok && r.text.length > 0 && r.finish === "length", JSON.stringify(r));
      else
        check(`${what} is refused by the browser`, !r.ok && /Connection error/i.test(r.error), JSON.stringify(r));
    }
  }
} finally {
  await browser.close();
  pages.close();
}
console.log(`${failures() ? "FAILED" : "all ok"}`);
process.exit(failures() ? 1 : 0);
