// Opens a subdomain preview (HOSTGATE_PREVIEW_URL) in a browser that is not
// logged in, as a person following a link does: the gateway's login page
// comes first, and after the token the browser must land on the preview,
// at the path and query it asked for, with the page running.
import { run, screenshot, env } from "./lib.mjs";

const token = env("HOSTGATE_TOKEN");
const preview = env("HOSTGATE_PREVIEW_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  const csp = [];
  page.on("console", (m) => { if (/Content Security Policy/.test(m.text())) csp.push(m.text()); });
  await page.goto(preview + "deep/page?tab=2");
  await page.waitForSelector("#token", { timeout: 20000 });
  await page.fill("#token", token);
  await page.click("#login");
  const want = new URL(preview);
  try {
    await page.waitForURL((u) => u.origin === want.origin && u.pathname === "/deep/page" && u.search === "?tab=2", { timeout: 20000 });
  } catch (e) {
    await screenshot(page, "previewlogin-failed");
    throw new Error(`after logging in the browser is at ${page.url()}, want ${want.origin}/deep/page?tab=2 (${csp.join("; ") || "no CSP report"}): ${e.message}`);
  }
  await page.waitForFunction(() => document.getElementById("mod") && document.getElementById("mod").textContent === "module ran: dep", null, { timeout: 20000 });
  await screenshot(page, "previewlogin");
});
