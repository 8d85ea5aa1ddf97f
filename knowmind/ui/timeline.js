// The timeline of a conversation or a person: who said what, when, in event-time order.
// The server filters by session, user and event time; the speaker is matched here.
import { $, api, busy, el, fill, session, t, views, when } from "./core.js";

const MAX_PAGES = 10; // 1,000 memories: a long conversation, not a whole tenant

async function fetchAll(query) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    if (cursor) query.set("cursor", cursor);
    const data = await api(`/v1/memories?${query}`);
    items.push(...data.items);
    cursor = data.next_cursor;
    if (!cursor) return { items, complete: true };
  }
  return { items, complete: false };
}

function query() {
  const q = new URLSearchParams({ limit: "100" });
  const value = (id) => $(id).value.trim();
  if (value("tl-session")) q.set("session_id", value("tl-session"));
  if (value("tl-user")) q.set("user_id", value("tl-user"));
  if (value("tl-from")) q.set("occurred_after", `${value("tl-from")}T00:00:00Z`);
  if (value("tl-to")) q.set("occurred_before", `${value("tl-to")}T23:59:59.999Z`);
  return q;
}

async function showTimeline() {
  const { items, complete } = await fetchAll(query());
  const speaker = $("tl-speaker").value.trim().toLocaleLowerCase();
  const said = items.filter((m) => !speaker || (m.speaker || "").toLocaleLowerCase().includes(speaker))
    .sort((a, b) => a.occurred_at.localeCompare(b.occurred_at));
  const speakers = countSpeakers(said);
  fill($("timeline-out"),
    el("h2", {}, t("timeline")),
    el("p", { class: "note" }, `${said.length} ${t("entries")}${complete ? "" : ` — ${t("first_only")}`}`),
    speakers.length ? el("p", { class: "speakers" }, `${t("speakers")}: `, speakers.map(([name, n]) =>
      el("button", { type: "button", class: "chip", onclick: () => { $("tl-speaker").value = name; busy(showTimeline); } }, `${name} (${n})`))) : null,
    said.length ? byDay(said) : el("p", {}, t("none_found")));
}

function countSpeakers(items) {
  const counts = new Map();
  for (const m of items) if (m.speaker) counts.set(m.speaker, (counts.get(m.speaker) || 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]);
}

function byDay(items) {
  const days = new Map();
  for (const m of items) {
    const day = new Date(m.occurred_at).toLocaleDateString(session.lang, { year: "numeric", month: "long", day: "numeric" });
    if (!days.has(day)) days.set(day, []);
    days.get(day).push(m);
  }
  return [...days].map(([day, list]) => el("section", { class: "day" },
    el("h3", {}, day),
    el("ol", { class: "timeline" }, list.map(entry))));
}

function entry(m) {
  const time = new Date(m.occurred_at).toLocaleTimeString(session.lang, { hour: "2-digit", minute: "2-digit" });
  return el("li", { class: `said ${m.role === "assistant" ? "assistant" : ""}` },
    el("time", { datetime: m.occurred_at, title: when(m.occurred_at) }, time),
    el("strong", { class: "speaker" }, m.speaker ? `${m.speaker}${m.role ? ` (${m.role})` : ""}` : t("nobody")),
    el("p", { class: "said-text" }, m.content),
    el("button", { type: "button", class: "link", onclick: () => { views.show("memories"); busy(() => views.openMemory(m.id)); } }, t("open")),
    m.session_id ? el("button", { type: "button", class: "link", onclick: () => { $("tl-session").value = m.session_id; busy(showTimeline); } }, `${t("session")} ${m.session_id}`) : null);
}

export function wireTimeline(onSubmit) {
  onSubmit("timeline-form", showTimeline);
}
