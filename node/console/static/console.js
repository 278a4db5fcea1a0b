// The console's one script. Every page works without it; it only adds:
// the overview's events as they happen (named as the owner calls each
// peer, linked to where each is recorded, in the list's aria-live
// region), copying a minted token, and a login code given in the URL's
// fragment (#code=…), which a server never sees, posted to log in.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  followEvents();
  copyButtons();
  loginFromFragment();
});

function followEvents() {
  const list = document.getElementById("events");
  if (!list || !window.EventSource) return;
  const state = document.getElementById("live-state");
  const es = new EventSource(list.dataset.live);
  es.onopen = () => { if (state) state.textContent = "Live: new events appear as they happen."; };
  es.onerror = () => { if (state) state.textContent = "Not live (reconnecting); reload to see newer events."; };
  const short = (id) => (id.length <= 20 ? id : id.slice(0, 12) + "…" + id.slice(-6));
  es.onmessage = (ev) => {
    let e;
    try { e = JSON.parse(ev.data); } catch { return; }
    const none = list.querySelector("li.none");
    if (none) none.remove();
    const li = document.createElement("li");
    li.className = "live";
    const time = document.createElement("time");
    time.textContent = new Date(e.at).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    const type = document.createElement("b");
    type.textContent = e.type;
    li.append(time, " ", type);
    if (e.peer) {
      const a = document.createElement("a");
      a.href = "/ui/peers/" + encodeURIComponent(e.peer);
      a.textContent = e.name || short(e.peer);
      li.append(" ", a);
    }
    const refused = e.type === "refused";
    if (e.conversation_id && refused) {
      // A refused message is recorded apart, never in the conversation it names.
      li.append(", naming " + e.conversation_id);
    } else if (e.conversation_id) {
      const a = document.createElement("a");
      a.href = e.link || "/ui/audit/c/" + encodeURIComponent(e.conversation_id);
      a.textContent = e.conversation_id;
      li.append(" in ", a);
    }
    let rest = "";
    if (e.detail) rest += ": " + e.detail;
    if (e.text) rest += " “" + e.text + "”";
    li.append(rest);
    if (refused && e.link) {
      const a = document.createElement("a");
      a.className = "record";
      a.href = e.link;
      a.textContent = "the refusal's record";
      li.append(" ", a);
    }
    list.prepend(li);
    while (list.children.length > 50) list.lastElementChild.remove();
  };
}

function copyButtons() {
  for (const b of document.querySelectorAll("button[data-copy]")) {
    b.addEventListener("click", async () => {
      const el = document.getElementById(b.dataset.copy);
      if (!el) return;
      el.select();
      try {
        await navigator.clipboard.writeText(el.value);
        b.textContent = "Copied";
      } catch {
        b.textContent = "Selected: copy it with Ctrl+C";
      }
    });
  }
}

function loginFromFragment() {
  const form = document.getElementById("login-form");
  const m = /(?:^#|&)code=([^&]+)/.exec(location.hash);
  if (!form || !m) return;
  history.replaceState(null, "", location.pathname);
  form.querySelector("input[name=code]").value = decodeURIComponent(m[1]);
  form.submit();
}
