// The token of an open terminal page is revoked: the page says the login
// ended and offers Log in again (it said only the gateway's "reload the
// page to log in again"), and a reload of the page, as that advice has
// it, leads to a login page that says the login ended (it said nothing,
// as to a first visit).
import { run, login, screenshot, env, screenShows as shows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const path = "/hosts/box/terminal";

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  await login(page, gateway, token, path);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.keyboard.type("echo before-$((6*7))\n");
  await shows(page, "before-42");
  console.log("hostgate-step: revoke");
  let seen;
  try {
    await page.waitForFunction(() => { const a = document.getElementById("relogin"); return a && !a.hidden; }, null, { timeout: 20000 });
  } catch (e) {
    // Below: what the page shows instead.
  } finally {
    seen = await page.evaluate(() => {
      const a = document.getElementById("relogin");
      return { status: document.getElementById("status").textContent, relogin: !!a && !a.hidden && a.textContent, href: a && a.getAttribute("href"), focused: !!a && document.activeElement === a };
    });
    console.log("after the revoke: " + JSON.stringify(seen));
  }
  if (!/login ended/.test(seen.status) || seen.relogin !== "Log in again" || seen.href !== "/login?error=session_ended&next=" + encodeURIComponent(path) || !seen.focused) {
    throw new Error("the token revoked, the terminal page shows " + JSON.stringify(seen) + ": want it said, with Log in again, the keyboard on it");
  }
  await screenshot(page, "revoked");
  await page.reload();
  const after = { url: page.url(), said: await page.textContent("#error").catch(() => null) };
  if (!after.url.startsWith(gateway + "/login?") || !/^Your login ended/.test(after.said || "")) {
    throw new Error("a reload of the revoked terminal's page shows " + JSON.stringify(after) + ": want the login page saying the login ended");
  }
  if (new URL(after.url).searchParams.get("next") !== path) throw new Error("the login page leads on to " + after.url);
  if (problems.length) throw new Error("the page logged:\n" + problems.join("\n"));
});
