// Logs in, opens the backend's preview once (its login mints that
// origin's preview cookie), then the frontend's preview, whose page POSTs
// JSON to the backend's preview with credentials: the answer must reach
// the page.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const front = env("HOSTGATE_FRONT_URL");
const back = env("HOSTGATE_BACK_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") console.log("console: " + m.text()); });
  await login(page, gateway, token);
  await page.goto(back);
  await page.waitForFunction(() => document.body && document.body.textContent.includes("backend"), null, { timeout: 20000 });
  await page.goto(front);
  await page.waitForFunction(() => document.getElementById("api").textContent !== "waiting", null, { timeout: 20000 });
  const got = await page.textContent("#api");
  await screenshot(page, "sibling");
  if (got !== 'api: 200 {"posted":{"n":42}}') throw new Error("the frontend's call to its backend: " + got);
});
