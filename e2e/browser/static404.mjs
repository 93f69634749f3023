// A browser sent to a file under /static/ that is not there (a stale or
// mistyped link) gets the UI's own 404 page, styled, with the way back to
// the hosts list; it got Go's plain "404 page not found". No directory
// under /static/ is listed, and a script or fetch of a missing file gets a
// plain 404, nosniff, it cannot take for anything else.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  await login(page, gateway, token);
  for (const p of ["/static/nosuch.js", "/static/vendor/nosuch.css", "/static/", "/static/vendor/", "/static/index.html"]) {
    const res = await page.goto(gateway + p);
    const h = res.headers();
    const seen = await page.evaluate(() => {
      const back = document.querySelector("main a.button");
      return {
        title: document.title,
        heading: (document.querySelector("main h2") || {}).textContent,
        text: document.body.innerText,
        // The stylesheet applied: the link back is a button.
        back: back && { href: back.getAttribute("href"), bg: getComputedStyle(back).backgroundColor },
        listed: [...document.querySelectorAll("a")].map((a) => a.getAttribute("href")).filter((h) => h && h !== "/"),
      };
    });
    if (res.status() !== 404 || h["content-type"] !== "text/html; charset=utf-8" || h["x-content-type-options"] !== "nosniff") {
      throw new Error("GET " + p + ": " + res.status() + " " + h["content-type"] + " nosniff " + h["x-content-type-options"] + ": " + JSON.stringify(seen.text) + "; want the UI's 404 page");
    }
    if (seen.title !== "hostgate · page not found" || seen.heading !== "Page not found" || !seen.back || seen.back.href !== "/" ||
        seen.back.bg === "rgba(0, 0, 0, 0)" || seen.listed.length) {
      throw new Error("GET " + p + " shows " + JSON.stringify(seen));
    }
  }
  await screenshot(page, "static-404");
  await Promise.all([page.waitForURL(gateway + "/"), page.click("main a.button")]);
  // A script's or fetch's miss: plain text, nosniff.
  const fetched = await page.evaluate(async () => {
    const r = await fetch("/static/nosuch.js");
    return { status: r.status, type: r.headers.get("content-type"), nosniff: r.headers.get("x-content-type-options"), body: await r.text() };
  });
  if (fetched.status !== 404 || fetched.type !== "text/plain; charset=utf-8" || fetched.nosniff !== "nosniff" || fetched.body.includes("<")) {
    throw new Error("fetch of a missing asset: " + JSON.stringify(fetched));
  }
  if (problems.length) throw new Error("the pages logged:\n" + problems.join("\n"));
});
