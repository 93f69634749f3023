// A first-time user on a phone (360 px wide): the login page, the hosts
// list and a terminal fit the screen (the host key column made the hosts
// page 654 px wide, the header ending mid-page), and no page logs an
// error or a CSP violation to the console. A screen reader hears each
// host's state, and a terminal's tab names its host. The login form and
// the terminal are each in the page's main landmark, where a screen
// reader's "main" key goes (they were in none). A terminal page has
// a Log out, and a logout in another tab sends the hosts page to the
// login page, which says why. The login form names the gateway as its
// username, so a password manager keeps two gateways' tokens apart.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const ctx = await browser.newContext({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
  const page = await ctx.newPage();
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(m.type() + ": " + m.text()); });
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  async function fits(what, p = page) {
    // Not innerWidth: a phone's browser zooms out to fit a wider page.
    const width = p.viewportSize().width;
    const scroll = await p.evaluate(() => document.documentElement.scrollWidth);
    if (scroll > width) throw new Error(what + " is " + scroll + " px wide on a " + width + " px screen");
  }

  await page.goto(gateway + "/login");
  await fits("the login page");
  // What a screen reader finds in the page's main landmark.
  const inMain = async (want) => {
    const main = page.getByRole("main");
    const got = (await main.count()) === 1 ? await main.ariaSnapshot() : "(" + await main.count() + " main landmarks)";
    for (const w of want) if (!got.includes(w)) throw new Error(page.url() + ": its main landmark reads\n" + got + "\nwant " + w);
  };
  await inMain(['textbox "Token"', 'button "Log in"']);
  // A password manager files a login under the form's username field
  // (autocomplete="username") next to its password: the form had the token
  // alone, so every gateway's token was one entry.
  const form = await page.evaluate(() => {
    const user = document.querySelector('form.login input[autocomplete="username"]');
    const pass = document.querySelector('form.login input[autocomplete="current-password"]');
    return user && pass && { user: user.value, readOnly: user.readOnly, label: user.labels.length && user.labels[0].textContent, pass: pass.type, order: !!(user.compareDocumentPosition(pass) & Node.DOCUMENT_POSITION_FOLLOWING) };
  });
  const host = new URL(gateway).host;
  if (!form || form.user !== host || !form.readOnly || !form.label || form.pass !== "password" || !form.order) {
    throw new Error("the login form's username and password fields: " + JSON.stringify(form) + ", want a readonly username " + host + " before the token");
  }
  await login(page, gateway, token);
  await page.locator("#hosts tbody tr").first().waitFor({ timeout: 20000 });
  await screenshot(page, "hosts-360");
  await fits("the hosts page");
  // A screen reader hears the host, then whether it is online (only the
  // dot's tooltip said so, read before the name), and which host each
  // Terminal button opens (every one was "Terminal").
  const row = await page.locator("#hosts tbody tr").first().ariaSnapshot();
  if (!row.includes("local (connected)") || !row.includes('link "Terminal on local"')) throw new Error("the hosts row reads as:\n" + row);
  // The list is named: a screen reader's table list said "table" and
  // nothing more, the page's one heading being "hostgate".
  const named = await page.getByRole("table", { name: "Hosts", exact: true }).count();
  if (named !== 1) throw new Error("the hosts page has " + named + " tables named Hosts; its main reads:\n" + await page.getByRole("main").ariaSnapshot());

  // Keyboard: Tab reaches the Terminal button, and it keeps the focus
  // across the list's refresh every 5 s (which threw it to the page's top).
  let tabs = 0;
  while (!(await page.evaluate(() => document.activeElement.classList.contains("terminal-link")))) {
    if (++tabs > 10) throw new Error("Tab does not reach a Terminal button");
    await page.keyboard.press("Tab");
  }
  await page.evaluate(() => { window.rowBefore = document.querySelector("#hosts tbody tr"); });
  await page.waitForFunction(() => { const r = document.querySelector("#hosts tbody tr"); return r && r !== window.rowBefore; }, null, { timeout: 15000 });
  await screenshot(page, "hosts-360-focus");
  if (!(await page.evaluate(() => document.activeElement.classList.contains("terminal-link") && document.activeElement.matches(":focus-visible")))) {
    throw new Error("the Terminal button lost the focus, or its ring, when the list refreshed");
  }
  await Promise.all([page.waitForURL(/\/terminal$/), page.keyboard.press("Enter")]);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 30000 });
  await screenshot(page, "terminal-360");
  const title = await page.title();
  if (!title.startsWith("local ")) throw new Error("the terminal page's title is " + JSON.stringify(title) + ", not its host's");
  await fits("the terminal page");
  await inMain(['textbox "Terminal input"', 'button "Screen reader"']);
  // Its header stays one line on a phone, the rows are the terminal's.
  const lines = await page.evaluate(() => {
    const tops = [...document.querySelectorAll("header > h1, header #status, header button")].filter((e) => e.getClientRects().length).map((e) => Math.round(e.getBoundingClientRect().top + e.getBoundingClientRect().height / 2));
    return Math.max(...tops) - Math.min(...tops);
  });
  if (lines > 8) throw new Error("the terminal page's header takes more than one line at 360 px (its items' middles " + lines + " px apart)");

  // A logout in another tab: the hosts page goes to the login page, which
  // says why (it showed the empty login form, no word). The logout is the
  // terminal page's own, as the hosts page's: it had none, and a person
  // done with a shell had to go back to the list to log out.
  const other = await ctx.newPage();
  await other.goto(gateway + "/");
  await Promise.all([page.waitForURL(/\/login/), page.click("header button:text('Log out')", { timeout: 5000 })]);
  await page.goto(gateway + "/hosts/local/terminal");
  if (!/\/login\?next=/.test(page.url())) throw new Error("after the terminal page's Log out its URL still opens: " + page.url());
  await other.waitForURL(/\/login\?error=session_ended/, { timeout: 20000 });
  const said = await other.textContent("#error");
  if (!said.includes("log in again")) throw new Error("after a logout in another tab the login page says " + JSON.stringify(said));

  // A login with no host yet: the list says how one appears (it was an
  // empty table).
  await login(other, gateway, env("HOSTGATE_CLIENT_TOKEN"));
  await other.locator("#hosts td.empty").waitFor({ timeout: 20000 });
  await screenshot(other, "hosts-empty-360");
  const empty = await other.textContent("#hosts td.empty");
  if (!empty.includes("agent connect --gateway " + gateway)) throw new Error("the empty hosts list says " + JSON.stringify(empty));
  await fits("the empty hosts list", other);

  if (problems.length) throw new Error("the console says:\n" + problems.join("\n"));

  // A mistyped address gets the UI's 404 page, which fits too (its status
  // is the one console error here, as the browser logs any 404).
  await other.goto(gateway + "/hosts/locl");
  await screenshot(other, "notfound-360");
  await fits("the 404 page", other);
});
