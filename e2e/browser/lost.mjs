// Opens the terminal of HOSTGATE_HOST, then freezes the gateway
// (SIGSTOP to HOSTGATE_GATEWAY_PID): its connection stays open and says
// nothing, as one whose network dropped. The page must say the connection
// is lost rather than show "connected" and take keystrokes nobody reads.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const pid = Number(env("HOSTGATE_GATEWAY_PID"));
const host = process.env.HOSTGATE_HOST || "local";

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token, "/hosts/" + encodeURIComponent(host) + "/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  process.kill(pid, "SIGSTOP");
  try {
    await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("connection lost"), null, { timeout: 60000 });
    await screenshot(page, "lost");
  } catch (e) {
    throw new Error("status with the gateway frozen: " + (await page.textContent("#status")) + " (" + e.message + ")");
  } finally {
    process.kill(pid, "SIGCONT");
  }
});
