// Logs in with a token, opens the terminal of HOSTGATE_HOST from the hosts
// list, types a command and reads its output back from the page.
import { run, login, screenshot, env, screenShows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const host = process.env.HOSTGATE_HOST || "local";

await run(async (browser) => {
  // HOSTGATE_SELF_SIGNED: a gateway serving TLS with a test certificate.
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 }, ignoreHTTPSErrors: !!process.env.HOSTGATE_SELF_SIGNED });
  await login(page, gateway, token);
  const row = page.locator(`tr[data-host="${host}"]`);
  await row.waitFor({ timeout: 20000 });
  await screenshot(page, "hosts");
  // The agent's build, from GET /v1/hosts' agentVersion.
  const title = await row.locator(".dot").getAttribute("title");
  if (!/^connected, agent \S/.test(title || "")) throw new Error(`host ${host}'s dot says ${JSON.stringify(title)}, want "connected, agent BUILD"`);
  await Promise.all([page.waitForNavigation(), row.locator("a.terminal-link").click()]);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  // The product of two numbers proves the shell ran the command rather than
  // echoing what was typed.
  await page.keyboard.type("echo hostgate-$((6*7))\n");
  await screenShows(page, "hostgate-42", 20000);
  await screenshot(page, "terminal");
});
