// knowmind console: a client of the public API. This module signs in, switches views and wires
// the others (memories, recall, graph, chat, timeline, admin); core.js has the shared helpers.
import { $, api, busy, forgetCatalogue, session, t, views } from "./core.js";
import { openMemory, wireMemories } from "./memories.js";
import { wireRecall } from "./recall.js";
import { wireGraph } from "./graph.js";
import { forgetThreads, wireChat } from "./chat.js";
import { wireTimeline } from "./timeline.js";
import { wireAdmin } from "./admin.js";

function applyTexts() {
  document.documentElement.lang = session.lang;
  document.title = t("title");
  for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of document.querySelectorAll("[data-i18n-label]")) node.setAttribute("aria-label", t(node.dataset.i18nLabel));
  $("who").textContent = session.role ? t(session.role === "admin" ? "signed_in_admin" : "signed_in_tenant") : "";
}

/** Check the token with one call its kind may make, then show that kind's views. */
async function signIn(token, asAdmin) {
  sessionStorage.setItem("km.token", token);
  try {
    await api(asAdmin ? "/v1/admin/tenants" : "/v1/stats");
  } catch (error) {
    sessionStorage.removeItem("km.token");
    throw new Error(`${t("bad_token")} (${error.message})`);
  }
  forgetCatalogue();
  forgetThreads();
  for (const key of ["km.threads", "km.memories"]) sessionStorage.removeItem(key);
  session.role = asAdmin ? "admin" : "tenant";
  sessionStorage.setItem("km.role", session.role);
  showApp();
}

function signOut() {
  sessionStorage.clear();
  session.role = null;
  forgetCatalogue();
  forgetThreads();
  $("nav").hidden = true;
  $("signout").hidden = true;
  for (const view of document.querySelectorAll(".view")) view.hidden = true;
  $("signin-view").hidden = false;
  applyTexts();
}

function showApp() {
  $("signin-view").hidden = true;
  $("nav").hidden = false;
  $("signout").hidden = false;
  for (const button of $("nav").querySelectorAll("button")) {
    button.hidden = Boolean(button.dataset.role) && button.dataset.role !== session.role;
  }
  applyTexts();
  const wanted = location.hash.slice(1);
  const allowed = [...$("nav").querySelectorAll("button:not([hidden])")].map((b) => b.dataset.view);
  show(allowed.includes(wanted) ? wanted : session.role === "admin" ? "admin" : allowed[0]);
}

function show(view) {
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  for (const button of $("nav").querySelectorAll("button")) {
    button.setAttribute("aria-current", button.dataset.view === view ? "page" : "false");
  }
  history.replaceState(null, "", `#${view}`);
  if (views.loaders[view]) busy(views.loaders[view]);
}

/** Arrow keys move between the views' buttons (as in a tab list); Enter opens one. */
function navKeys(event) {
  const buttons = [...$("nav").querySelectorAll("button:not([hidden])")];
  const at = buttons.indexOf(document.activeElement);
  const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
  if (at < 0 || !step) return;
  event.preventDefault();
  buttons[(at + step + buttons.length) % buttons.length].focus();
}

function onSubmit(id, action) {
  $(id).addEventListener("submit", (event) => {
    event.preventDefault();
    busy(() => action(event));
  });
}

function start() {
  views.show = show;
  views.openMemory = openMemory;
  views.signIn = signIn;
  $("lang").value = session.lang;
  $("lang").addEventListener("change", () => {
    session.lang = $("lang").value;
    localStorage.setItem("km.lang", session.lang);
    applyTexts();
  });
  onSubmit("signin-form", async () => {
    const token = $("token").value.trim();
    $("token").value = "";
    await signIn(token, $("kind-admin").checked);
  });
  $("signout").addEventListener("click", signOut);
  for (const button of $("nav").querySelectorAll("button")) button.addEventListener("click", () => show(button.dataset.view));
  $("nav").addEventListener("keydown", navKeys);
  wireMemories(onSubmit);
  wireRecall(onSubmit);
  wireGraph();
  wireChat(onSubmit);
  wireTimeline(onSubmit);
  wireAdmin(onSubmit);
  session.role = sessionStorage.getItem("km.token") ? sessionStorage.getItem("km.role") : null;
  applyTexts();
  if (session.role) showApp();
}

start(); // a module runs once the document is parsed
