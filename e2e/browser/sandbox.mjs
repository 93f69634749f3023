// An admin starts a sandbox from the hosts page and lands in its terminal:
// the shell runs as the container's non-root user, a uid of its own from
// 2000000000 up. Meanwhile the button and the polite live region
// (role=status) say it is starting.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token);
  const button = page.locator("#new-sandbox");
  await button.waitFor({ state: "visible", timeout: 20000 });
  // While the gateway creates it the button says it is working, and the
  // page's live region says so to a screen reader: it said nothing, and
  // took a second click. The request is held until the page is read.
  let during = null;
  await page.route("**/v1/executions", async (route) => {
    during = await page.evaluate(() => {
      const b = document.getElementById("new-sandbox"), live = document.getElementById("progress");
      return { disabled: b.disabled, label: b.textContent, live: live.textContent, role: live.getAttribute("role"), alert: document.getElementById("error").textContent };
    });
    await route.continue();
  });
  await Promise.all([page.waitForURL(/\/hosts\/[^/]+\/terminal$/, { timeout: 120000 }), button.click()]);
  if (!during || !during.disabled || !/Starting/.test(during.label) || !/^Starting a sandbox/.test(during.live) || during.role !== "status" || during.alert !== "") {
    throw new Error("while the sandbox was created the page showed " + JSON.stringify(during));
  }
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 60000 });
  await page.keyboard.type("echo uid=$(id -u) sandbox-$((6*7))\n");
  await page.waitForFunction(() => {
    const buf = window.hostgateTerm.buffer.active;
    for (let i = 0; i < buf.length; i++) {
      const line = buf.getLine(i);
      if (line && /uid=20\d{8} sandbox-42/.test(line.translateToString(true))) return true;
    }
    return false;
  }, null, { timeout: 30000 });
  await screenshot(page, "sandbox-terminal");
  console.log("sandbox " + page.url());
});
