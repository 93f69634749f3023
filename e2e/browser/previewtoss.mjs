// Logs in and opens a victim preview (its login mints that origin's
// preview cookie); then opens another preview whose page plants a
// hostgate_preview cookie for the whole preview domain, with the victim's
// path so that Chromium sends it first; then opens the victim's preview
// again, which must still show.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const victim = env("HOSTGATE_VICTIM_URL");
const evil = env("HOSTGATE_EVIL_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token);
  await page.goto(victim);
  await page.waitForFunction(() => document.body && document.body.textContent.includes("victim page"), null, { timeout: 20000 });
  await page.goto(evil);
  await page.waitForFunction(() => document.body && document.body.textContent.includes("planted"), null, { timeout: 20000 });
  const cookies = await page.context().cookies(victim);
  console.log("cookies the browser holds for the victim: " + cookies.map((c) => c.name + " domain=" + c.domain + " path=" + c.path).join(", "));
  try {
    await page.goto(victim);
    await page.waitForFunction(() => document.body && document.body.textContent.includes("victim page"), null, { timeout: 20000 });
  } catch (e) {
    await screenshot(page, "previewtoss");
    throw new Error("the victim's preview after another preview planted a cookie: " + e.message);
  }
  await screenshot(page, "previewtoss");
});
