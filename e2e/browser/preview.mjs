// Opens a preview of an HTTP server on the host (HOSTGATE_PREVIEW_URL), after
// logging in, and checks that the page rendered and that its WebSocket
// echoed through the preview.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const preview = env("HOSTGATE_PREVIEW_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token);
  await page.goto(preview);
  await page.waitForSelector("#title", { timeout: 20000 });
  await page.waitForFunction(() => document.getElementById("echo").textContent === "echo: ping-through-preview", null, { timeout: 20000 });
  await screenshot(page, "preview");
});
