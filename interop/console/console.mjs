// console.mjs drives the owner's console (node/console) in Debian's
// Chromium through playwright-core, as its owner would: run by
// interop/console's TestConsoleInBrowser, which starts two `ifaced run`
// daemons, has bob greet alice and ask her for two capabilities, and
// passes alice's one-time login URL from `ifaced ui --no-open`.
//
//   node console.mjs
//
// Input (environment): IFACED_UI_URL (the login URL), IFACED_UI_PAGE (the
// login page file `ifaced ui` handed a desktop opener), IFACED_BOB (bob's
// peer ID), IFACED_BOB_FP (his key's fingerprint, as his owner would read
// it out), IFACED_CONVERSATION (the conversation of his requests),
// IFACED_CONSOLE_SHOTS (where screenshots go), CHROMIUM (the browser).
//
// Output: one JSON object on standard output saying what each scenario
// saw; the Go test checks it, and checks the daemons' own state through
// their control APIs. A failed step throws, and the script exits 1 with
// the step on standard error.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const loginURL = env("IFACED_UI_URL");
const loginPage = env("IFACED_UI_PAGE");
const bob = env("IFACED_BOB");
const bobFP = env("IFACED_BOB_FP");
const conversation = env("IFACED_CONVERSATION");
const shots = env("IFACED_CONSOLE_SHOTS");
mkdirSync(shots, { recursive: true });
const origin = new URL(loginURL).origin;
const out = {};
let step = "launching Chromium";
let page;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = async (name) => page.screenshot({ path: join(shots, name + ".png"), fullPage: true });
  const text = async (sel) => (await page.locator(sel).first().innerText()).trim();
  const expect = (cond, what) => {
    if (!cond) throw new Error(what);
  };
  // submit clicks a form's button and waits for the page it leads to.
  const submit = async (locator) => {
    const [r] = await Promise.all([page.waitForNavigation(), locator.click()]);
    return r;
  };

  step = "logging in through the URL of ifaced ui";
  let resp = await page.goto(loginURL);
  expect(resp.ok(), `the login answered ${resp.status()}`);
  expect(new URL(page.url()).pathname === "/ui/" && !page.url().includes("code="), `after logging in the browser is at ${page.url()}`);
  out.loggedIn = true;
  out.overviewPeerID = await text("#peer-id");
  const cookies = await ctx.cookies(origin + "/ui/");
  out.cookie = cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path }));
  // The code was spent: the URL in the history opens nothing.
  const again = await ctx.newPage();
  resp = await again.goto(loginURL);
  out.codeReuseStatus = resp.status();
  await again.close();
  await page.waitForFunction(() => document.getElementById("live-state")?.textContent.startsWith("Live"), null, { timeout: 15000 });
  await shot("1-overview");

  step = "logging in through the login page ifaced ui hands a desktop opener";
  // A browser of its own: the page file leads it to the login, whose
  // script posts the code from the URL's fragment; the session cookie
  // (SameSite=Strict) must then reach the overview, although the
  // navigation began at a file.
  const pctx = await browser.newContext();
  const pp = await pctx.newPage();
  pp.on("pageerror", (e) => errors.push(String(e)));
  await pp.goto("file://" + loginPage);
  await pp.waitForURL((u) => u.origin === origin && u.pathname === "/ui/", { timeout: 15000 });
  out.pageLoggedIn = !pp.url().includes("code=");
  out.pageOverviewPeerID = (await pp.locator("#peer-id").first().innerText()).trim();
  await pp.screenshot({ path: join(shots, "1b-overview-from-login-page.png"), fullPage: true });
  await pctx.close();

  step = "seeing the peer and what it sees";
  await page.goto(origin + "/ui/peers");
  out.peersListBob = (await page.locator(`tr[data-peer="${bob}"]`).count()) === 1;
  out.bobTierBefore = await text(`tr[data-peer="${bob}"] td.tier`);
  await page.click(`tr[data-peer="${bob}"] a`);
  out.calendarBefore = await text('#seen tr[data-cap="calendar.availability"] td.standing');
  out.diaryBefore = await text('#seen tr[data-cap="diary.read"] td.standing');
  await shot("2-peer");

  step = "raising the peer's tier on the policy page";
  await page.click("#change-grant");
  expect(new URL(page.url()).pathname === "/ui/policy", `the grant link went to ${page.url()}`);
  expect((await page.inputValue("#grant-peer")) === bob, "the policy form is not filled with bob");
  await page.selectOption("#grant-tier", "professional");
  await submit(page.locator('#grant-form button[type="submit"]'));
  out.grantNotice = await text("#notice");
  await shot("3-policy");
  await page.click("#peer-link");
  out.bobTierAfter = await text("#tier");
  out.calendarAfter = await text('#seen tr[data-cap="calendar.availability"] td.standing');
  await page.screenshot({ path: join(shots, "console.png") }); // the README's picture: the peer's page, first screen
  await shot("4-peer-after");

  step = "pinning the peer's key by comparing fingerprints";
  await page.goto(origin + "/ui/trust");
  const row = page.locator(`#trust tr[data-peer="${bob}"]`);
  out.fingerprintShown = (await row.locator("code.fingerprint").innerText()).trim();
  await row.locator('form.pin input[name="fingerprint"]').fill(bobFP);
  await submit(row.locator('form.pin button[type="submit"]'));
  out.pinNotice = await text("#notice");
  out.bobLevelAfterPin = await text(`#trust tr[data-peer="${bob}"] td.level`);
  await shot("5-trust");

  step = "minting and revoking an introduction";
  await page.fill("#intro-label", "Carol");
  await page.fill("#intro-expires", "2d");
  await page.selectOption("#intro-tier", "professional");
  await submit(page.locator('#mint-form button[type="submit"]'));
  out.token = await page.inputValue("#token");
  await shot("6-intro-minted");
  const minted = page.locator("#issued tr[data-intro]").first();
  out.introID = await minted.getAttribute("data-intro");
  out.introStateMinted = (await minted.locator("td.state").innerText()).trim();
  await submit(minted.locator('button[type="submit"]'));
  out.introStateRevoked = await text(`#issued tr[data-intro="${out.introID}"] td.state`);
  out.tokenShownAgain = (await page.content()).includes(out.token);

  step = "opening the conversation's audit and its why";
  await page.goto(origin + "/ui/audit");
  await page.click(`tr[data-conversation="${conversation}"] a`);
  out.conversationEntries = await page.locator("li.entry").count();
  out.refusals = await page.locator("li.entry.refusal").count();
  const ifp3 = page.locator("li.entry pre.ifp3").first();
  await page.locator("li.entry details summary").first().click();
  out.ifp3Start = (await ifp3.innerText()).split("\n")[0];
  await shot("7-conversation");
  await page.locator("li.entry.refusal a.why").first().click();
  out.whyURL = new URL(page.url()).pathname;
  out.whyDecision = (await page.locator("#decision").count()) === 1 ? "recorded" : "none";
  if (out.whyDecision === "recorded") {
    out.whyOutcome = await text("#why-outcome");
    out.whyConditions = await page.locator("#why-conditions tbody tr").count();
  } else {
    out.whyNoDecision = await text("#no-decision");
  }
  out.whyEntryShown = (await page.locator("#why-entry").count()) === 1;
  await shot("8-why");

  step = "watching an event arrive live";
  await page.goto(origin + "/ui/");
  await page.waitForFunction(() => document.getElementById("live-state")?.textContent.startsWith("Live"), null, { timeout: 15000 });
  const before = await page.locator("#events li").count();
  const other = await ctx.newPage();
  await other.goto(origin + "/ui/caps");
  await other.fill("#capability", JSON.stringify({ name: "browser.added", description: "Added from the browser test" }));
  await other.click('#add-cap button[type="submit"]');
  out.addNotice = (await other.locator("#notice").innerText()).trim();
  await other.close();
  // The document event, added to the list without a reload.
  const live = page.locator("#events li.live", { hasText: "document" }).first();
  await live.waitFor({ timeout: 15000 });
  out.liveEvent = (await live.innerText()).trim();
  out.eventsGrew = (await page.locator("#events li").count()) > before;
  await shot("9-live");

  step = "a change with a forged CSRF token";
  await page.goto(origin + "/ui/policy?peer=" + encodeURIComponent(bob));
  await page.selectOption("#grant-tier", "close");
  await page.locator('#grant-form input[name="csrf"]').evaluate((el) => { el.value = "forged"; });
  const forged = await submit(page.locator('#grant-form button[type="submit"]'));
  out.forgedCSRFStatus = forged.status();
  out.forgedCSRFMessage = await text("#error");
  await shot("10-csrf-refused");

  step = "a request without the session cookie";
  const anon = await browser.newContext();
  const ap = await anon.newPage();
  resp = await ap.goto(origin + "/ui/policy");
  out.noCookieStatus = resp.status();
  out.noCookieMessage = (await ap.locator("#error").innerText()).trim();
  out.noCookiePageShowsPeerID = (await ap.content()).includes(out.overviewPeerID);
  // A form posted from the console's own origin, without a session.
  const [posted] = await Promise.all([
    ap.waitForNavigation(),
    ap.evaluate((peer) => {
      const f = document.createElement("form");
      f.method = "post";
      f.action = "/ui/policy/disclosure";
      for (const [k, v] of Object.entries({ peer, tier: "close", csrf: "none" })) {
        const i = document.createElement("input");
        i.name = k;
        i.value = v;
        f.append(i);
      }
      document.body.append(f);
      f.submit();
    }, bob),
  ]);
  out.noCookiePostStatus = posted.status();
  await ap.screenshot({ path: join(shots, "11-no-session.png"), fullPage: true });
  await anon.close();

  out.pageErrors = errors;
  process.stdout.write(JSON.stringify(out) + "\n");
} catch (e) {
  process.stderr.write(`console.mjs: ${step}: ${e.stack || e}\n`);
  if (page) {
    process.stderr.write(`the page was ${page.url()}; its picture is failed.png\n`);
    await page.screenshot({ path: join(shots, "failed.png"), fullPage: true }).catch(() => {});
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exitCode = 1;
} finally {
  await browser.close();
}
