// Opens a preview in the path form (HOSTGATE_PATH_URL) after logging in,
// as a person pasting the link does, and checks that the whole page works
// as a dev server's page needs: its module scripts (and what they import),
// stylesheet and image load, and its fetch reaches its own server. The
// page ends up on the subdomain form (HOSTGATE_SUBDOMAIN_ORIGIN).
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const pathURL = env("HOSTGATE_PATH_URL");
const subdomain = env("HOSTGATE_SUBDOMAIN_ORIGIN");

await run(async (browser) => {
  const page = await browser.newPage();
  const failed = [];
  page.on("requestfailed", (r) => failed.push(r.url() + " " + (r.failure() && r.failure().errorText)));
  page.on("console", (m) => { if (m.type() === "error") console.log("console: " + m.text()); });
  await login(page, gateway, token);
  await page.goto(pathURL + "?tab=2");
  try {
    await page.waitForFunction(() => document.getElementById("mod").textContent === "module ran: dep", null, { timeout: 20000 });
    await page.waitForFunction(() => document.getElementById("api").textContent === "api: pong", null, { timeout: 20000 });
    await page.waitForFunction(() => document.getElementById("logo").complete, null, { timeout: 20000 });
  } catch (e) {
    await screenshot(page, "pathform-failed");
    throw new Error(`page at ${page.url()} did not run whole (failed requests: ${failed.join(", ") || "none"}): ${e.message}`);
  }
  const url = new URL(page.url());
  if (url.origin !== subdomain || url.pathname !== "/" || url.search !== "?tab=2") {
    throw new Error(`page at ${page.url()}, want ${subdomain}/?tab=2`);
  }
  const color = await page.evaluate(() => getComputedStyle(document.getElementById("title")).color);
  if (color !== "rgb(10, 20, 30)") throw new Error("stylesheet not applied: title color " + color);
  const width = await page.evaluate(() => document.getElementById("logo").naturalWidth);
  if (width !== 10) throw new Error("image not loaded: naturalWidth " + width);
  await screenshot(page, "pathform");
});
