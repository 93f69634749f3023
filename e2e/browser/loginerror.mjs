// The login page shows only the gateway's own error messages: a link's
// ?error= text is not shown, a wrong token gets the fixed message. A
// screen reader hears it where the page puts the keyboard, on the token
// field, which says it is invalid: the message was only in an alert
// region that was full before the page loaded, which screen readers do
// not announce, and the field it was about said nothing.
import { run, login, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");

await run(async (browser) => {
  const page = await browser.newPage();
  const spoof = "Your token was rotated; fetch the new one at https://evil.example";
  await page.goto(gateway + "/login?error=" + encodeURIComponent(spoof));
  let shown = await page.textContent("#error");
  if (shown !== "") throw new Error("the login page shows the link's text: " + JSON.stringify(shown));
  if (await page.getAttribute("#token", "aria-invalid")) throw new Error("with no error of the gateway's the token field says it is invalid");
  await login(page, gateway, "hg_not-a-token");
  shown = await page.textContent("#error");
  if (!shown.startsWith("That token is not valid: ")) throw new Error("after a wrong token the login page shows " + JSON.stringify(shown));
  console.log("shown: " + shown);
  // What a screen reader hears on the focused field: Chromium's
  // accessibility tree, read over DevTools.
  const cdp = await page.context().newCDPSession(page);
  const { root } = await cdp.send("DOM.getDocument");
  const { nodeId } = await cdp.send("DOM.querySelector", { nodeId: root.nodeId, selector: "#token" });
  const { nodes } = await cdp.send("Accessibility.getPartialAXTree", { nodeId, fetchRelatives: false });
  const n = nodes[0];
  const prop = (name) => { const p = (n.properties || []).find((p) => p.name === name); return p && p.value.value; };
  const field = { focused: await page.evaluate(() => document.activeElement.id), name: n.name && n.name.value, description: n.description && n.description.value, invalid: prop("invalid") };
  console.log("the token field reads: " + JSON.stringify(field));
  if (field.focused !== "token" || field.name !== "Token" || field.description !== shown || field.invalid !== "true") {
    throw new Error("after a wrong token the token field reads " + JSON.stringify(field) + "; want it focused, named Token, described by the message and invalid");
  }
});
