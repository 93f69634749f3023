// A hung dev server in real Chromium: a page of the preview (HOSTGATE_PAGE_URL)
// holds a fetch that asks for text/html and an EventSource, both waiting on
// the dev server; once they reached it (HOSTGATE_CONTROL_URL/arrived), a
// second tab loads a page the dev server never answers
// (HOSTGATE_HANG_URL). That load must end with the preview's 504 page
// naming the host and port; then the dev server answers the first page's
// requests (HOSTGATE_CONTROL_URL/release), which must not have been cut.
// The browser is in the dark scheme: the 504 page follows it (its text of
// contrast 4.5 or more), is titled by what happened, is a main landmark
// and offers a reload (TestBrowserPreviewPages reads the other kinds).
import { run, login, screenshot, env, lowestContrast } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const pageURL = env("HOSTGATE_PAGE_URL");
const hangURL = env("HOSTGATE_HANG_URL");
const control = env("HOSTGATE_CONTROL_URL");
const port = env("HOSTGATE_DEV_PORT");

await run(async (browser) => {
  const ctx = await browser.newContext({ colorScheme: "dark" });
  const page = await ctx.newPage();
  await login(page, gateway, token);
  await page.goto(pageURL);
  await page.waitForSelector("#title", { timeout: 20000 });
  for (let i = 0; ; i++) {
    const r = await fetch(control + "/arrived");
    if ((await r.text()) === "yes") break;
    if (i > 600) throw new Error("the page's fetch and event stream did not reach the dev server in 60 s");
    await new Promise((res) => setTimeout(res, 100));
  }
  const hung = await ctx.newPage();
  const started = Date.now();
  const resp = await hung.goto(hangURL, { timeout: 120000 });
  console.log(`the hung page load ended after ${Date.now() - started} ms with ${resp.status()}`);
  await screenshot(hung, "hung");
  if (resp.status() !== 504) throw new Error("the hung page load: status " + resp.status());
  const text = await hung.textContent("body");
  for (const want of [`Port ${port} of host local has not answered this page`, "Check its terminal on the host"]) {
    if (!text.includes(want)) throw new Error(`the 504 page does not say "${want}": ${text}`);
  }
  const page504 = await hung.evaluate(() => ({ title: document.title, bg: getComputedStyle(document.body).backgroundColor, mains: document.querySelectorAll("main").length, links: [...document.querySelectorAll("main a")].map((a) => a.textContent), script: !!document.querySelector("script") }));
  const worst = await hung.evaluate(lowestContrast);
  console.log("the 504 page: " + JSON.stringify(page504) + ", lowest contrast " + worst.ratio);
  const [r, g, b] = page504.bg.match(/\d+/g).map(Number);
  if ((r + g + b) / 3 > 128 || worst.ratio < 4.5) throw new Error("the 504 page in the dark scheme: background " + page504.bg + ", lowest contrast " + JSON.stringify(worst));
  if (!page504.title.startsWith(`Port ${port} of host local has not answered this page`) || page504.mains !== 1 || !page504.links.includes("Reload this page") || page504.script) {
    throw new Error("the 504 page: " + JSON.stringify(page504) + ", want it titled by what happened, one main landmark, a reload link, no script");
  }
  await fetch(control + "/release");
  await page.waitForFunction(() => document.getElementById("fetch").textContent !== "waiting" &&
    document.getElementById("events").textContent !== "waiting", null, { timeout: 30000 });
  const got = { fetch: await page.textContent("#fetch"), events: await page.textContent("#events") };
  await screenshot(page, "spared");
  if (got.fetch !== "fetch: 200 slow done" || got.events !== "events: released") {
    throw new Error("the page's fetch and event stream were cut: " + JSON.stringify(got));
  }
});
