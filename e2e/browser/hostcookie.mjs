// Logs in to an https gateway, opens a public share's preview whose page
// plants gateway session cookies for the parent domain the gateway and the
// previews share, then opens the gateway's page again, which must still
// show the viewer logged in.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const evil = env("HOSTGATE_EVIL_URL");
const victim = env("HOSTGATE_VICTIM_URL");

await run(async (browser) => {
  // The TLS front's certificate is self-signed.
  const page = await browser.newPage({ ignoreHTTPSErrors: true });
  await login(page, gateway, token);
  const before = await page.context().cookies(gateway);
  console.log("session cookies after login: " + before.map((c) => c.name + " secure=" + c.secure).join(", "));
  await page.goto(evil);
  await page.waitForFunction(() => document.body && document.body.textContent.includes("planted"), null, { timeout: 20000 });
  const held = await page.context().cookies(gateway);
  console.log("cookies the browser sends the gateway: " + held.map((c) => c.name + " domain=" + c.domain + " path=" + c.path).join(", "));
  await page.goto(gateway + "/");
  const me = await page.evaluate(async () => (await fetch("/v1/me", { credentials: "same-origin" })).status);
  await screenshot(page, "hostcookie");
  if (page.url().includes("/login") || me !== 200) {
    throw new Error("after a preview planted parent-domain cookies the gateway's page is " + page.url() + " and /v1/me answers " + me + ": locked out");
  }
  // A preview not shared: the login flow gives its origin its own cookie.
  await page.goto(victim);
  try {
    await page.waitForFunction(() => document.body && document.body.textContent.includes("victim page"), null, { timeout: 20000 });
  } catch (e) {
    await screenshot(page, "hostcookie-preview");
    throw new Error("a preview after the login flow, with the planted cookies: " + page.url() + ": " + e.message);
  }
  const own = (await page.context().cookies(victim)).filter((c) => c.domain !== ".example.test");
  console.log("preview cookies: " + own.map((c) => c.name + " secure=" + c.secure).join(", "));
});
