// Logs in, then opens a path-form preview (on the gateway's own origin)
// whose page tries the gateway with the viewer's session: read the hosts,
// make a public share, open the terminal socket, read the cookie. Each
// must fail: the page runs sandboxed in an opaque origin.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const preview = env("HOSTGATE_PATH_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token);
  await page.goto(preview);
  await page.waitForFunction(() => document.getElementById("done") && document.getElementById("done").textContent === "done", null, { timeout: 30000 });
  const got = await page.evaluate(() => ({
    hosts: document.getElementById("hosts").textContent,
    share: document.getElementById("share").textContent,
    pty: document.getElementById("pty").textContent,
    cookie: document.getElementById("cookie").textContent,
  }));
  await screenshot(page, "pathformapi");
  console.log("outcomes: " + JSON.stringify(got));
  const bad = Object.entries(got).filter(([, v]) => !v.startsWith("refused"));
  if (bad.length) throw new Error("a path-form page reached the gateway with the viewer's session: " + JSON.stringify(bad));
});
