// Opens the terminal of HOSTGATE_HOST, sets a shell variable, then freezes
// the gateway (SIGSTOP to HOSTGATE_GATEWAY_PID): its connection stays open
// and says nothing, as one whose network dropped. The page must say the
// connection is lost rather than show "connected" and take keystrokes
// nobody reads. Once the gateway runs again the page must reconnect to the
// same shell (the variable is still set, and what the shell printed while
// the page was away is on screen), and a reload of the page must too.
import { run, login, screenshot, env, screenShows as shows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const pid = Number(env("HOSTGATE_GATEWAY_PID"));
const host = process.env.HOSTGATE_HOST || "local";

function connected(page) {
  return page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 60000 });
}

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token, "/hosts/" + encodeURIComponent(host) + "/terminal");
  await connected(page);
  // Products prove the shell ran each command rather than echoing it.
  await page.keyboard.type("HG_MARK=kept$((6*7)); echo set-$((5*5))\n");
  await shows(page, "set-25");
  // Printed while the gateway is frozen: the page gets it on resuming.
  await page.keyboard.type("sleep 2; echo away-$((7*8))\n");
  process.kill(pid, "SIGSTOP");
  try {
    await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("connection lost"), null, { timeout: 60000 });
    await screenshot(page, "lost");
  } catch (e) {
    throw new Error("status with the gateway frozen: " + (await page.textContent("#status")) + " (" + e.message + ")");
  } finally {
    process.kill(pid, "SIGCONT");
  }
  try {
    await connected(page);
    await shows(page, "away-56");
    await page.keyboard.type("echo mark=$HG_MARK\n");
    await shows(page, "mark=kept42");
  } catch (e) {
    await screenshot(page, "resumed");
    throw new Error("after the gateway came back: status " + (await page.textContent("#status")) + " (" + e.message + ")");
  }
  await screenshot(page, "resumed");
  // A reload of the tab gets the same shell back, with its recent output.
  await page.reload();
  try {
    await connected(page);
    await shows(page, "mark=kept42");
    await page.keyboard.type("echo again=$HG_MARK\n");
    await shows(page, "again=kept42");
  } catch (e) {
    await screenshot(page, "reloaded");
    throw new Error("after a reload: status " + (await page.textContent("#status")) + " (" + e.message + ")");
  }
  await screenshot(page, "reloaded");
});
