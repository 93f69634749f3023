// A page from another origin, in a browser that holds the gateway's session
// cookie, tries to open the pty socket (cross-site WebSocket hijacking). The
// gateway must refuse it.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const foreign = env("HOSTGATE_FOREIGN_URL"); // a page on another origin
const host = process.env.HOSTGATE_HOST || "local";

await run(async (browser) => {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  await login(page, gateway, token);
  await page.goto(foreign);
  const wsURL = gateway.replace(/^http/, "ws") + "/v1/hosts/" + encodeURIComponent(host) + "/pty";
  const outcome = await page.evaluate((u) => new Promise((resolve) => {
    const ws = new WebSocket(u);
    ws.onopen = () => { resolve("open"); ws.close(); };
    ws.onerror = () => resolve("refused");
    setTimeout(() => resolve("timeout"), 15000);
  }), wsURL);
  await screenshot(page, "crossorigin");
  if (outcome !== "refused") throw new Error("cross-origin pty socket: " + outcome + ", want refused");
});
