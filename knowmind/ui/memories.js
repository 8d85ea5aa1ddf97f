// Memories: the list (server pages by cursor, filters, sorting, a search through recall), a
// memory's full view with its history, entities by name, superseding and erasure.
import { $, api, busy, el, facts, fill, highlight, humanise, queryWords, relationCatalogue, snippet, t, table, views, when } from "./core.js";

const PAGE = 20;
const FIELDS = ["q", "type", "tag", "source", "speaker", "user", "session", "from", "to", "sort"];

/** Where the list stands: its filters and the cursors of the pages seen (kept in the tab). */
const state = JSON.parse(sessionStorage.getItem("km.memories") || "null") || { filters: {}, cursors: [null], page: 0 };

function remember() {
  sessionStorage.setItem("km.memories", JSON.stringify(state));
}

function readFilters() {
  state.filters = Object.fromEntries(FIELDS.map((f) => [f, $(`f-${f}`).value.trim()]).filter(([, v]) => v));
  state.cursors = [null];
  state.page = 0;
  remember();
}

function writeFilters() {
  for (const f of FIELDS) $(`f-${f}`).value = state.filters[f] || (f === "sort" ? "created_desc" : "");
}

/** The list's filters, every one applied by the server (sorting orders the page shown). */
function serverQuery(cursor) {
  const f = state.filters;
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (cursor) query.set("cursor", cursor);
  if (f.type) query.set("memory_type", f.type);
  if (f.tag) query.set("tag", f.tag);
  if (f.source) query.set("source", f.source);
  if (f.speaker) query.set("speaker", f.speaker);
  if (f.user) query.set("user_id", f.user);
  if (f.session) query.set("session_id", f.session);
  if (f.from) query.set("occurred_after", `${f.from}T00:00:00Z`);
  if (f.to) query.set("occurred_before", `${f.to}T23:59:59.999Z`);
  return query;
}

function recallFilters() {
  const f = state.filters;
  const out = {};
  if (f.type) out.memory_type = f.type;
  if (f.tag) out.tags = [f.tag];
  if (f.source) out.source = f.source;
  if (f.user) out.user_id = f.user;
  if (f.session) out.session_id = f.session;
  if (f.from) out.occurred_after = `${f.from}T00:00:00Z`;
  if (f.to) out.occurred_before = `${f.to}T23:59:59.999Z`;
  return out;
}

const SORTS = {
  created_desc: (a, b) => b.created_at.localeCompare(a.created_at),
  created_asc: (a, b) => a.created_at.localeCompare(b.created_at),
  occurred_desc: (a, b) => b.occurred_at.localeCompare(a.occurred_at),
  occurred_asc: (a, b) => a.occurred_at.localeCompare(b.occurred_at),
  title: (a, b) => (a.title || a.content).localeCompare(b.title || b.content, undefined, { sensitivity: "base" }),
};

views.loaders.memories = async () => {
  writeFilters();
  showList();
  await (state.filters.q ? search() : loadPage());
};

function showList() {
  $("memory-detail").hidden = true;
  $("memory-list").hidden = false;
  $("memory-tools").hidden = false;
}

async function loadPage() {
  const page = await api(`/v1/memories?${serverQuery(state.cursors[state.page])}`);
  if (page.next_cursor) state.cursors[state.page + 1] = page.next_cursor;
  else state.cursors.length = state.page + 1;
  remember();
  const shown = [...page.items].sort(SORTS[state.filters.sort || "created_desc"]);
  renderList(shown, `${t("page")} ${state.page + 1} · ${shown.length}`);
}

async function search() {
  const q = state.filters.q;
  const body = { query: q, k: 25, filters: recallFilters() };
  const outcome = await api("/v1/recall", { method: "POST", body });
  const seen = new Set();
  const hits = outcome.results.filter((h) => !seen.has(h.memory_id) && seen.add(h.memory_id))
    .filter((h) => !state.filters.speaker || h.speaker === state.filters.speaker);
  const words = queryWords(q);
  const rows = hits.map((h) => [
    titleButton(h.memory_id, h.title || snippet(h.content, 60)),
    el("span", { class: "snippet" }, highlight(snippet(h.content, 220), words)),
    h.memory_type, h.source || "—", h.speaker || "—", when(h.occurred_at || h.created_at), h.score.toFixed(2),
  ]);
  fill($("memory-list"),
    el("h2", {}, t("search_results")),
    el("p", { class: "note" }, `${hits.length} ${t("results_for")} „${q}“`),
    rows.length ? table([t("col_title"), t("col_snippet"), t("col_type"), t("col_source"), t("col_speaker"), t("col_when"), t("score")], rows, { id: "memory-table" })
      : el("p", {}, t("none_found")));
}

function titleButton(id, label) {
  return el("button", { type: "button", class: "link", "data-id": id, onclick: () => busy(() => openMemory(id)) }, label);
}

function renderList(items, summary) {
  const rows = items.map((m) => [
    titleButton(m.id, m.title || snippet(m.content, 60)),
    el("span", { class: "snippet" }, snippet(m.content)),
    m.memory_type, m.tags.join(", ") || "—", m.source || "—", m.speaker || "—", when(m.occurred_at),
  ]);
  fill($("memory-list"),
    el("h2", {}, t("v_memories")),
    el("p", { class: "note", id: "page-note" }, summary),
    items.length ? table([t("col_title"), t("col_snippet"), t("col_type"), t("col_tags"), t("col_source"), t("col_speaker"), t("col_when")], rows, { id: "memory-table" })
      : el("p", {}, t("none_found")),
    el("nav", { class: "pager", "aria-label": t("pages") },
      el("button", { type: "button", id: "page-prev", disabled: state.page === 0, onclick: () => turn(-1) }, t("previous")),
      el("button", { type: "button", id: "page-next", disabled: !state.cursors[state.page + 1], onclick: () => turn(1) }, t("next"))));
}

function turn(step) {
  state.page += step;
  remember();
  busy(loadPage);
}

// ---- one memory ---------------------------------------------------------------------------

export async function openMemory(id) {
  const memory = await api(`/v1/memories/${id}`);
  const [{ relations }, history, catalogue] = await Promise.all([
    api(`/v1/nodes/${id}/relations`), api(`/v1/memories/${id}/history`), relationCatalogue(),
  ]);
  const mentioned = relations.filter((r) => r.predicate === "MENTIONS" && r.node.kind === "entity");
  const others = relations.filter((r) => !mentioned.includes(r));
  const detail = $("memory-detail");
  const receipt = el("div", { id: "receipt", role: "status" });
  fill(detail,
    el("button", { type: "button", id: "back", onclick: () => busy(views.loaders.memories) }, t("back")),
    el("h2", { tabindex: "-1" }, `${t("memory")}: ${memory.title || snippet(memory.content, 60)}`),
    el("pre", { class: "content", id: "memory-content" }, memory.content),
    memoryFacts(memory),
    el("h3", {}, t("entities")),
    mentioned.length ? el("ul", { id: "memory-entities" }, mentioned.map((r) => el("li", {},
      el("button", { type: "button", class: "link", onclick: () => views.openGraph(r.node) },
        `${r.node.title_or_name} (${r.node.entity_class})`)))) : el("p", {}, "—"),
    el("h3", {}, t("relations")),
    others.length ? el("ul", { id: "memory-relations" }, others.map((r) => el("li", {}, relationLine(r, catalogue)))) : el("p", {}, "—"),
    el("h3", {}, t("history")),
    historyList(history, catalogue),
    supersedeForm(memory),
    el("h3", {}, t("erase")),
    el("p", { class: "note" }, t("erase_hint")),
    eraseButton(memory.id, receipt),
    receipt,
  );
  $("memory-list").hidden = true;
  $("memory-tools").hidden = true;
  detail.hidden = false;
  detail.querySelector("h2").focus(); // keyboard users land on what they opened
}

function memoryFacts(memory) {
  return facts({
    [t("col_type")]: memory.memory_type, [t("col_tags")]: memory.tags.join(", ") || "—",
    [t("col_source")]: memory.source || "—", [t("col_speaker")]: memory.speaker ? `${memory.speaker}${memory.role ? ` (${memory.role})` : ""}` : "—",
    [t("col_when")]: when(memory.occurred_at), [t("col_created")]: when(memory.created_at),
    [t("valid")]: `${when(memory.valid_from)} – ${memory.valid_to ? when(memory.valid_to) : "…"}`,
    [t("scope")]: [memory.user_id && `user ${memory.user_id}`, memory.session_id && `session ${memory.session_id}`].filter(Boolean).join(", ") || t("shared"),
    [t("chunks")]: memory.chunks, [t("document")]: memory.document_id || "—", id: memory.id,
  });
}

function relationLine(r, catalogue) {
  const other = r.node.title_or_name || r.node.id;
  const open = r.node.kind === "memory"
    ? el("button", { type: "button", class: "link", onclick: () => busy(() => openMemory(r.node.id)) }, other)
    : el("button", { type: "button", class: "link", onclick: () => views.openGraph(r.node) }, other);
  const verb = humanise(r.predicate, catalogue.labels);
  return r.direction === "out" ? [`${t("this_memory")} → ${verb} → `, open] : [open, ` → ${verb} → ${t("this_memory")}`];
}

const otherMemory = (id, label) => el("button", { type: "button", class: "link", onclick: () => busy(() => openMemory(id)) }, label);

function historyList(history, catalogue) {
  if (!history.events.length) return el("p", { id: "memory-history" }, t("no_history"));
  return el("ol", { id: "memory-history", class: "history" }, history.events.map((e) => el("li", {},
    el("time", { datetime: e.at }, when(e.at)), " ", historyText(e, catalogue))));
}

function historyText(e, catalogue) {
  const who = e.automatic ? t("automatically") : e.actor ? `${t("by")} ${e.actor}` : "";
  const reason = e.reason ? ` — ${e.reason}` : "";
  const fact = e.fact ? ` (${e.fact.subject.name || "?"} → ${humanise(e.fact.predicate, catalogue.labels)} → ${e.fact.old_object.name || "?"} ⇒ ${e.fact.new_object.name || "?"})` : "";
  const link = e.memory_id ? otherMemory(e.memory_id, t("the_other")) : null;
  return [t(`ev_${e.event}`), " ", link, fact, who ? ` · ${who}` : "", reason];
}

function supersedeForm(memory) {
  const content = el("textarea", { id: "s-content", rows: 3, required: true });
  const reason = el("input", { id: "s-reason" });
  const out = el("p", { class: "note", role: "status" });
  const form = el("form", { class: "sub", "aria-labelledby": "s-h" },
    el("h3", { id: "s-h" }, t("supersede")),
    el("p", { class: "note" }, t("supersede_hint")),
    el("label", { for: "s-content" }, t("new_content")), content,
    el("label", { for: "s-reason" }, t("reason")), reason,
    el("button", { type: "submit" }, t("supersede_submit")), out);
  content.value = memory.content;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(async () => {
      const body = { new_content: content.value };
      if (reason.value.trim()) body.update_reason = reason.value.trim();
      const done = await api(`/v1/memories/${memory.id}/supersede`, { method: "POST", body });
      fill(out, `${t("superseded")} `, otherMemory(done.id, t("open_new")));
    });
  });
  return form;
}

function eraseButton(id, receipt) {
  let armed = false;
  const button = el("button", { type: "button", class: "danger", id: "erase" }, t("erase"));
  button.addEventListener("click", () => {
    if (!armed) {
      armed = true;
      button.textContent = t("erase_confirm");
      return;
    }
    busy(async () => {
      const done = await api(`/v1/memories/${id}?erase=true`, { method: "DELETE" });
      button.disabled = true;
      fill(receipt, el("h3", {}, t("receipt")), facts(done));
    });
  });
  return button;
}

async function upload() {
  const file = $("d-file").files[0];
  const content = file ? await file.text() : $("d-content").value;
  const body = { content };
  const title = $("d-title").value.trim() || (file ? file.name : "");
  if (title) body.title = title;
  if ($("d-source").value.trim()) body.source = $("d-source").value.trim();
  const done = await api("/v1/documents?wait=true", { method: "POST", body });
  $("upload-result").textContent = `${t("uploaded")}: ${done.status}, ${t("chunks")}: ${done.chunks}`;
  await views.loaders.memories();
}

export function wireMemories(onSubmit) {
  onSubmit("filter-form", async () => { readFilters(); await views.loaders.memories(); });
  $("f-reset").addEventListener("click", () => {
    state.filters = {};
    state.cursors = [null];
    state.page = 0;
    remember();
    busy(views.loaders.memories);
  });
  onSubmit("upload-form", upload);
}
