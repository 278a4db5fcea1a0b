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
// IFACED_CAROL (carol's peer ID: she greeted alice, and alice revokes
// her), IFACED_GREET_AS_CAROL (a JSON array: the command that makes carol
// greet alice again), IFACED_AXE (axe-core's script, loaded into each
// page by this script, never by the console), IFACED_CONSOLE_SHOTS (where
// screenshots go), IFACED_BUNDLE_OUT (where the conversation's evidence
// bundle, downloaded from its page, is saved), CHROMIUM (the browser).
//
// Output: one JSON object on standard output saying what each scenario
// saw; the Go test checks it, and checks the daemons' own state through
// their control APIs. A failed step throws, and the script exits 1 with
// the step on standard error.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";

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
const carol = env("IFACED_CAROL");
const greetAsCarol = JSON.parse(env("IFACED_GREET_AS_CAROL"));
const axeSource = readFileSync(env("IFACED_AXE"), "utf8");
const shots = env("IFACED_CONSOLE_SHOTS");
const bundleOut = env("IFACED_BUNDLE_OUT");
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
  // The form shows the state: the tier just granted, the cap in force.
  out.grantTierShown = await page.inputValue("#grant-tier");
  out.grantPeerShown = await page.inputValue("#grant-peer");
  out.capMaxShown = await page.inputValue("#cap-max");
  await shot("3-policy");
  await page.click("#peer-link");
  out.bobTierAfter = await text("#tier");
  out.calendarAfter = await text('#seen tr[data-cap="calendar.availability"] td.standing');

  step = "what bob holds beside what he would get";
  out.bobHeldTier = await text("#held-tier");
  out.calendarHeld = await text('#seen tr[data-cap="calendar.availability"] td.held');
  out.bobDifference = await text("#difference");
  out.bobAdvice = (await page.locator("#seen .advice").allInnerTexts()).join(" | ");
  await page.screenshot({ path: join(shots, "console-desktop.png") }); // the docs' picture: the peer's page, first screen
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
  out.introConfirm = await text("#confirm .question");
  await submit(page.locator("#confirm-button"));
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

  step = "seeing the conversation verified and downloading its evidence bundle";
  // A record made between the checkpoint the page's load signs and its
  // export is pending (the conversation goes on while the browser looks):
  // the page says to reload, and each load signs a checkpoint first.
  for (let i = 0; i < 5 && (await text("#proof-state .badge")) === "Pending"; i++) {
    await page.reload();
  }
  out.proofState = await text("#proof-state .badge");
  out.proofCheckpoints = await page.locator("#proof-checkpoints li").count();
  if ((await page.locator("#bundle-link").count()) === 1) {
    const [dl] = await Promise.all([page.waitForEvent("download"), page.click("#bundle-link")]);
    out.bundleName = dl.suggestedFilename();
    await dl.saveAs(bundleOut);
    out.bundleSaved = true;
  }
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
  out.inclusionState = (await page.locator("#inclusion-state .badge").count()) ? await text("#inclusion-state .badge") : "";
  out.inclusionLeaf = (await page.locator("#inclusion-leaf").count()) ? await text("#inclusion-leaf") : "";
  out.inclusionTree = (await page.locator("#inclusion-tree code").count()) ? await text("#inclusion-tree code") : "";
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

  step = "revoking carol, confirmed on a page of its own";
  await page.goto(origin + "/ui/trust");
  const carolRow = page.locator(`#trust tr[data-peer="${carol}"]`);
  await submit(carolRow.locator("form.revoke button"));
  out.revokeConfirm = await text("#confirm .question");
  await shot("12-confirm-revoke");
  await submit(page.locator("#confirm-button"));
  out.revokeNotice = await text("#notice");
  out.revokeNoticeClass = await page.locator("#notice").getAttribute("class");
  out.carolRevokeButtons = await page.locator(`#trust tr[data-peer="${carol}"] form.revoke`).count();
  out.carolPinButton = (await page.locator(`#trust tr[data-peer="${carol}"] form.pin button`).innerText()).trim();

  step = "a revoked peer, refused everywhere";
  await page.goto(origin + "/ui/peers");
  out.carolPeersRow = await text(`#peers tr[data-peer="${carol}"]`);
  out.carolPeersRowClass = await page.locator(`#peers tr[data-peer="${carol}"]`).getAttribute("class");
  await page.goto(origin + "/ui/peers/" + encodeURIComponent(carol));
  out.carolRefusedNotice = (await page.locator("#refused").count()) === 1 ? await text("#refused") : "";
  out.carolSeenTables = await page.locator("#seen").count();
  out.carolPinAgain = await page.locator("#pin-again button").count();
  out.carolPageText = await text("main");
  await shot("13-revoked-peer");

  step = "a refused greeting, found from its event";
  await page.goto(origin + "/ui/");
  await page.waitForFunction(() => document.getElementById("live-state")?.textContent.startsWith("Live"), null, { timeout: 15000 });
  let greeted = true;
  try {
    execFileSync(greetAsCarol[0], greetAsCarol.slice(1), { stdio: "pipe", timeout: 60000 });
  } catch {
    greeted = false;
  }
  out.carolGreetingTaken = greeted;
  const refusedEvent = page.locator("#events li.live", { hasText: "refused" }).first();
  await refusedEvent.waitFor({ timeout: 15000 });
  out.refusedEvent = (await refusedEvent.innerText()).trim();
  out.eventsLive = await page.locator("#events").getAttribute("aria-live");
  const record = refusedEvent.locator("a.record");
  out.refusedEventLinks = await refusedEvent.locator("a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  const followed = await submit(record);
  out.refusalPageStatus = followed.status();
  out.refusalTargets = await page.locator("#refusals li.target").count();
  out.refusalTargetCode = out.refusalTargets ? await page.locator("#refusals li.target").first().getAttribute("data-code") : "";
  out.refusalTargetWhy = out.refusalTargets ? await text("#refusals li.target .why") : "";
  await shot("14-refusal");
  // Every link of the event resolves.
  out.eventLinkStatuses = [];
  for (const href of out.refusedEventLinks) {
    const r = await page.request.get(origin + href);
    out.eventLinkStatuses.push(r.status());
  }
  await page.goto(origin + "/ui/audit?q=key_revoked");
  out.auditSearchRevoked = await page.locator('#refused-messages li[data-code="key_revoked"]').count();
  await page.goto(origin + "/ui/audit?refusals=1");
  out.auditRefusalsOnly = await page.locator('#refused-messages li[data-code="key_revoked"]').count();
  await page.goto(origin + "/ui/audit/refusals?code=key_revoked&peer=" + encodeURIComponent(carol));
  out.refusalsByCode = await page.locator('#refusals li[data-code="key_revoked"]').count();

  step = "seen as an unknown peer";
  const unknown = await page.goto(origin + "/ui/caps?as=nobody");
  out.unknownSeenStatus = unknown.status();
  out.unknownSeenError = (await page.locator("#seen-error").count()) ? await text("#seen-error") : "";
  out.unknownSeenTables = await page.locator("#seen").count();
  out.unknownSeenFacts = await page.locator("#seen-facts").count();
  out.unknownFieldError = await page.locator("#as-error").count();

  step = "seen as, by keyboard only";
  {
    const kp = await ctx.newPage();
    kp.on("pageerror", (e) => errors.push(String(e)));
    await kp.goto(origin + "/ui/caps");
    let tabs = 0;
    let reached = false;
    for (; tabs < 40 && !reached; ) {
      await kp.keyboard.press("Tab");
      tabs++;
      const a = await kp.evaluate(() => ({ id: document.activeElement?.id, href: document.activeElement?.getAttribute("href") }));
      if (a.id === "as") reached = true;
      else if (a.href === "#seen-as") await kp.keyboard.press("Enter");
    }
    out.keyboardTabs = reached ? tabs : -1;
    // The focus ring is visible where the focus is.
    out.keyboardFocusRing = await kp.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    await kp.keyboard.type("Bob's agent"); // a display name, as the command line takes one
    await Promise.all([kp.waitForNavigation(), kp.keyboard.press("Enter")]);
    out.keyboardSeenAs = (await kp.locator("#seen-facts").count()) ? (await kp.locator("#seen-facts").innerText()).trim() : "";
    await kp.close();
  }

  step = "every page at desktop and at 375 px: screenshots, overflow, axe";
  {
    const pages = [
      ["overview", "/ui/"],
      ["peers", "/ui/peers"],
      ["peer", "/ui/peers/" + encodeURIComponent(bob)],
      ["peer-revoked", "/ui/peers/" + encodeURIComponent(carol)],
      ["caps", "/ui/caps"],
      ["caps-seen-as", "/ui/caps?as=" + encodeURIComponent(bob)],
      ["caps-seen-unknown", "/ui/caps?as=nobody"],
      ["cap-edit", "/ui/caps/edit/ping"],
      ["policy", "/ui/policy?peer=" + encodeURIComponent(bob)],
      ["trust", "/ui/trust"],
      ["audit", "/ui/audit"],
      ["audit-search", "/ui/audit?q=key_revoked"],
      ["conversation", "/ui/audit/c/" + encodeURIComponent(conversation)],
      ["why", out.whyURL],
      ["refusals", "/ui/audit/refusals"],
      ["confirm", null], // a revocation's confirmation page: posted, not linked
      ["login", "anon"],
    ];
    const wp = await ctx.newPage();
    wp.on("pageerror", (e) => errors.push(String(e)));
    const anon = await browser.newContext();
    const ap = await anon.newPage();
    out.axe = {};
    out.overflow = {};
    out.shots = [];
    const open = async (p, path, name) => {
      if (path === "anon") {
        await ap.goto(origin + "/ui/login");
        return ap;
      }
      if (path === null) {
        await p.goto(origin + "/ui/trust");
        await Promise.all([p.waitForNavigation(), p.locator(`#trust tr[data-peer="${bob}"] form.revoke button`).click()]);
        return p;
      }
      const r = await p.goto(origin + path);
      const want = name === "caps-seen-unknown" ? 404 : 200;
      if (r.status() !== want) throw new Error(`${path} answered ${r.status()}, want ${want}`);
      return p;
    };
    const axe = async (p) => {
      // Loaded by the test through the DevTools protocol, which the
      // page's Content-Security-Policy does not govern: the console
      // itself loads nothing but its own script.
      await p.evaluate(axeSource);
      return p.evaluate(async () => {
        const r = await window.axe.run(document, { resultTypes: ["violations"] });
        return r.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`);
      });
    };
    const overflow = (p) =>
      p.evaluate(() => {
        const vw = document.documentElement.clientWidth;
        const wide = [];
        for (const el of document.querySelectorAll("body *")) {
          const r = el.getBoundingClientRect();
          if (r.width === 0 || r.height === 0 || r.right <= 0) continue; // not laid out, or off-screen on purpose (the skip links)
          if (r.right > vw + 0.5 || r.width > vw + 0.5) {
            wide.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : ""} (${Math.round(r.left)}..${Math.round(r.right)})`);
          }
        }
        const sw = document.documentElement.scrollWidth;
        if (sw > vw) wide.unshift(`the page scrolls sideways: ${sw} px wide in ${vw}`);
        return wide.slice(0, 8);
      });
    for (const [name, path] of pages) {
      for (const [size, vp] of [["desktop", { width: 1100, height: 760 }], ["phone", { width: 375, height: 740 }]]) {
        const p = path === "anon" ? ap : wp;
        await p.setViewportSize(vp);
        await open(p, path, name);
        await p.screenshot({ path: join(shots, `${size}-${name}.png`), fullPage: true });
        out.shots.push(`${size}-${name}.png`);
        if (size === "phone") {
          out.overflow[name] = await overflow(p);
          if (name === "peer") {
            // The docs' phone picture: what bob holds beside what he would get.
            await p.evaluate(() => document.getElementById("holds").scrollIntoView());
            await p.screenshot({ path: join(shots, "console-phone.png") });
          }
        }
        out.axe[`${size} ${name}`] = await axe(p);
      }
    }
    await anon.close();
    await wp.close();
  }

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
