// The chat page of `synapse serve` in Debian's headless Chromium, driven by playwright-core (run by
// tests/cli/test_serve_clients.sh). usage: node chat_page.mjs URL EXPECTED_FIRST_REPLY SCREENSHOT.png
// Sends two messages at temperature 0 with at most 64 tokens each (enough chunks to see a reply
// grow even on a busy machine); each reply must stream (the text is seen growing) and
// finish; the first must be `synapse run --chat --temp 0`'s text.
import { chromium } from "playwright-core";

const [url, expectedFirst, screenshot] = process.argv.slice(2);
let failed = 0;
const check = (desc, cond, detail = "") => {
  console.log(`${cond ? "ok" : "FAIL"}: ${desc}${cond ? "" : " " + detail}`);
  if (!cond) failed++;
};

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
    // Every change of the reply's text is recorded as it happens, from before the message is
    // sent: a streamed reply is seen at several lengths before it is done.
    await page.evaluate(() => {
      window.lengths = new Set();
      const log = document.getElementById("log");
      new MutationObserver(() => {
        const replies = log.querySelectorAll(".msg.assistant");
        const last = replies[replies.length - 1];
        if (last && last.firstChild) window.lengths.add(last.firstChild.data.length);
      }).observe(log, { subtree: true, characterData: true, childList: true });
    });
    await page.fill("#input", text);
    await page.press("#input", "Enter");
    await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant")[n]?.dataset.done === "true", i,
                               { timeout: 30_000 });
    const reply = page.locator(".msg.assistant").nth(i);
    const lengths = new Set(await page.evaluate(() => [...window.lengths]));
    const done = await reply.getAttribute("data-done");
    const content = await reply.evaluate((el) => el.firstChild.data);
    const stats = await reply.locator(".stats").textContent();
    check(`reply ${i + 1} finished with text and speed shown`, done === "true" && content.length > 0 && /tok\/s/.test(stats),
          JSON.stringify({ done, content, stats }));
    check(`reply ${i + 1} streamed (seen at ${lengths.size} lengths)`, lengths.size >= 3);
    if (i === 0) check("reply 1 is synapse run's greedy text", content === expectedFirst, JSON.stringify(content));
  }
  check("the conversation shows both questions and both replies",
        (await page.locator(".msg.user").count()) === 2 && (await page.locator(".msg.assistant").count()) === 2);
  await page.screenshot({ path: screenshot, fullPage: true });
} finally {
  await browser.close();
}
console.log(`${failed ? "FAILED" : "all ok"}`);
process.exit(failed ? 1 : 0);
