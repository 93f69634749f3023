// A screen reader reads the terminal's output once the header's "Screen
// reader" toggle is on, reached and pressed by keyboard alone: xterm draws
// on a canvas, and none of what the shell printed reached the
// accessibility tree (Chromium's, read over DevTools as a screen reader
// reads the platform's). The toggle says its state (aria-pressed), and a
// reload keeps it. It is off by default (it slows the drawing of a flood
// for everyone), so the terminal's input, where the keyboard starts, says
// while it is off that the output is not read and how to reach the
// toggle: the toggle alone went unnoticed by someone who never left the
// terminal.
import { run, login, screenshot, env, screenShows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const cdp = await page.context().newCDPSession(page);
  // The names of the accessibility tree's nodes that hold text.
  const read = async (text) => {
    const { nodes } = await cdp.send("Accessibility.getFullAXTree");
    return nodes.filter((n) => !n.ignored && n.name && String(n.name.value || "").includes(text)).map((n) => n.role.value + ": " + n.name.value);
  };
  const readable = async (text) => {
    for (const end = Date.now() + 10000; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
      const got = await read(text);
      if (got.length) return got;
    }
    return [];
  };
  await login(page, gateway, token, "/hosts/local/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  const toggle = () => page.evaluate(() => { const b = document.getElementById("reader"); return b && { pressed: b.getAttribute("aria-pressed"), name: b.textContent.trim() }; });
  // What a screen reader hears on entering the terminal: its input's
  // description.
  const described = async () => {
    const { root } = await cdp.send("DOM.getDocument", { depth: -1 });
    const { nodeId } = await cdp.send("DOM.querySelector", { nodeId: root.nodeId, selector: "#term textarea" });
    const { nodes } = await cdp.send("Accessibility.getPartialAXTree", { nodeId, fetchRelatives: false });
    return (nodes[0].description && nodes[0].description.value) || "";
  };
  const off = await described();
  console.log("the terminal's input is described: " + JSON.stringify(off));
  if (!off.includes("Ctrl+Shift+L leaves the terminal") || !off.includes("Screen reader mode is off: what the shell prints is not read. Ctrl+Shift+L, then Tab, reaches the Screen reader switch.")) {
    throw new Error("with the mode off, entering the terminal a screen reader hears " + JSON.stringify(off) + "; want the keys and that the output is not read, and how to reach the switch");
  }
  let t = await toggle();
  if (!t || t.pressed !== "false" || t.name !== "Screen reader") throw new Error("the terminal page's screen reader toggle: " + JSON.stringify(t) + ", want \"Screen reader\" with aria-pressed=false");
  // By keyboard alone: out of the terminal to Log out, on to the toggle
  // over the terminal.
  await page.keyboard.press("Control+Shift+L");
  await page.keyboard.press("Tab");
  const on = await page.evaluate(() => document.activeElement.id);
  if (on !== "reader") throw new Error("Tab from Log out reached #" + on + ", want the toggle");
  await page.keyboard.press("Space");
  t = await toggle();
  if (t.pressed !== "true") throw new Error("Space on the toggle left it " + JSON.stringify(t));
  await page.keyboard.press("Tab");
  if (!(await page.evaluate(() => document.getElementById("term").contains(document.activeElement)))) throw new Error("Tab from the toggle did not reach the terminal");
  await page.keyboard.type("echo spoken-$((6*7))\n");
  await screenShows(page, "spoken-42");
  const got = await readable("spoken-42");
  console.log("the accessibility tree reads: " + JSON.stringify(got));
  if (!got.length) throw new Error("with the toggle on, the shell's output spoken-42 is not in the accessibility tree");
  const onHint = await described();
  if (onHint.includes("is off") || !onHint.includes("Ctrl+Shift+L leaves the terminal")) throw new Error("with the mode on, the terminal's input is described " + JSON.stringify(onHint));
  await screenshot(page, "reader-on");
  // A reload keeps it.
  await page.reload();
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  t = await toggle();
  const mode = await page.evaluate(() => window.hostgateTerm.options.screenReaderMode);
  if (t.pressed !== "true" || !mode) throw new Error("after a reload the toggle is " + JSON.stringify(t) + " and xterm's screenReaderMode " + mode);
  await page.click("#reader");
  t = await toggle();
  if (t.pressed !== "false") throw new Error("a click on the toggle left it " + JSON.stringify(t));
});
