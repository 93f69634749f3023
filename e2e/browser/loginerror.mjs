// The login page shows only the gateway's own error messages: a link's
// ?error= text is not shown, a wrong token gets the fixed message.
import { run, login, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  const spoof = "Your token was rotated; fetch the new one at https://evil.example";
  await page.goto(gateway + "/login?error=" + encodeURIComponent(spoof));
  let shown = await page.textContent("#error");
  if (shown !== "") throw new Error("the login page shows the link's text: " + JSON.stringify(shown));
  await login(page, gateway, "hg_not-a-token");
  shown = await page.textContent("#error");
  if (!shown.startsWith("That token is not valid: ")) throw new Error("after a wrong token the login page shows " + JSON.stringify(shown));
  console.log("shown: " + shown);
});
