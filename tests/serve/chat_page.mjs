// The chat page of `synapse serve` in Debian's headless Chromium, driven by playwright-core (run by
// tests/cli/test_serve_clients.sh). usage: node chat_page.mjs URL EXPECTED_FIRST_REPLY SCREENSHOT.png
// Sends two messages at temperature 0 with at most 64 tokens each; each reply must stream (the
// page's stream reader records how many content deltas it received, data-chunks) and finish; the
// first must be `synapse run --chat --temp 0`'s text.
import { chromium } from "playwright-core";
import { check, failures } from "./check.mjs";

const [url, expectedFirst, screenshot] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById("model").textContent === "tiny", null, { timeout: 10_000 });
  check("the page shows the model's alias", true);
  await page.fill("#temperature", "0");
  await page.fill("#max_tokens", "64");

  for (const [i, text] of ["Name three rivers.", "And three mountains?"].entries()) {
    await page.fill("#input", text);
    await page.press("#input", "Enter");
    await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant")[n]?.dataset.done === "true", i,
                               { timeout: 30_000 });
    const reply = page.locator(".msg.assistant").nth(i);
    const chunks = Number(await reply.getAttribute("data-chunks"));
    const done = await reply.getAttribute("data-done");
    const content = await reply.evaluate((el) => el.firstChild.data);
    const stats = await reply.locator(".stats").textContent();
    check(`reply ${i + 1} finished with text and its token count shown`,
          done === "true" && content.length > 0 && /^\d+ tokens, /.test(stats),
          JSON.stringify({ done, content, stats }));
    // What the page itself received: the number of content deltas its stream reader handled,
    // whatever the network's timing (one read may carry several events).
    check(`reply ${i + 1} streamed (${chunks} content chunks)`, chunks >= 3);
    if (i === 0) check("reply 1 is synapse run's greedy text", content === expectedFirst, JSON.stringify(content));
  }
  check("the conversation shows both questions and both replies",
        (await page.locator(".msg.user").count()) === 2 && (await page.locator(".msg.assistant").count()) === 2);
  await page.screenshot({ path: screenshot, fullPage: true });
} finally {
  await browser.close();
}
console.log(`${failures() ? "FAILED" : "all ok"}`);
process.exit(failures() ? 1 : 0);
