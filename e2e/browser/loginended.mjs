// The login ends (here its token expires) while the terminal page is away
// from the gateway (frozen with SIGSTOP, as a network that dropped). Once
// the gateway answers again the page says the login ended and offers to
// log in again, which leads back to this terminal page: it went on
// "connection lost: reconnecting…" for the 5 minutes a terminal is kept,
// its WebSocket refused 401 unseen each time, and then said "reload the
// page".
import { run, login, screenshot, env, screenShows as shows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const admin = env("HOSTGATE_ADMIN_TOKEN");
const expires = Number(env("HOSTGATE_TOKEN_EXPIRES_MS"));
const pid = Number(env("HOSTGATE_GATEWAY_PID"));
const path = "/hosts/local/terminal";

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  await login(page, gateway, token, path);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.keyboard.type("echo before-$((6*7))\n");
  await shows(page, "before-42");
  process.kill(pid, "SIGSTOP");
  let resumed = 0;
  try {
    await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("connection lost"), null, { timeout: 60000 });
    // The token expires with the gateway still away.
    while (Date.now() < expires + 1000) await new Promise((r) => setTimeout(r, 100));
  } finally {
    process.kill(pid, "SIGCONT");
    resumed = Date.now();
  }
  let seen;
  try {
    await page.waitForFunction(() => { const a = document.getElementById("relogin"); return a && !a.hidden; }, null, { timeout: 30000 });
  } catch (e) {
    // Below: what the page shows instead.
  } finally {
    seen = await page.evaluate(() => {
      const a = document.getElementById("relogin");
      return { status: document.getElementById("status").textContent, relogin: !!a && !a.hidden && a.textContent, href: a && a.getAttribute("href"),
        again: !document.getElementById("again") || !document.getElementById("again").hidden };
    });
    console.log((Date.now() - resumed) + " ms after the gateway answered again: " + JSON.stringify(seen));
  }
  if (!/login ended/.test(seen.status) || seen.relogin !== "Log in again" || seen.href !== "/login?error=session_ended&next=" + encodeURIComponent(path) || seen.again) {
    throw new Error("the login ended while the page was away; the page shows " + JSON.stringify(seen) + ": want it said, with Log in again");
  }
  await screenshot(page, "login-ended");
  await Promise.all([page.waitForURL(/\/login\?/), page.click("#relogin")]);
  const said = await page.textContent("#error");
  if (!/Your login ended/.test(said)) throw new Error("the login page says " + JSON.stringify(said));
  await page.fill("#token", admin);
  await Promise.all([page.waitForURL(gateway + path), page.click("#login")]);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.keyboard.type("echo back-$((7*8))\n");
  await shows(page, "back-56");
  if (problems.length) throw new Error("the page logged:\n" + problems.join("\n"));
});
