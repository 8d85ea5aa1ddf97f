// knowmind console: a client of the public API. Every piece of data reaches the page through
// textContent (el() below), never as HTML: memory content is untrusted.
"use strict";

const KM = (() => {
  const $ = (id) => document.getElementById(id);
  const STAGES = ["bm25", "vector", "graph", "statements", "identity", "relations"];
  let lang = localStorage.getItem("km.lang") || (navigator.language || "en").slice(0, 2);
  if (!window.KM_TEXTS[lang]) lang = "en";
  let role = null; // "tenant" | "admin"

  const t = (key) => window.KM_TEXTS[lang][key] || window.KM_TEXTS.en[key] || key;

  /** An element with attributes and children (strings become text nodes). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** Replace a node's children (null and undefined left out; the DOM would print "null"). */
  function fill(target, ...children) {
    target.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
  }

  function applyTexts() {
    document.documentElement.lang = lang;
    document.title = t("title");
    for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
    $("nav").setAttribute("aria-label", t("nav"));
    $("graph").setAttribute("aria-label", t("graph_label"));
    $("who").textContent = role ? t(role === "admin" ? "signed_in_admin" : "signed_in_tenant") : "";
  }

  function say(message) {
    $("status").textContent = message || "";
  }

  function fail(error) {
    say("");
    const box = $("error");
    box.hidden = false;
    box.textContent = `${t("error")}: ${error.message || error}`;
  }

  /** Same-origin JSON call with the session's bearer token. */
  async function api(path, options = {}) {
    const token = sessionStorage.getItem("km.token");
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method: options.method || "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: "omit",
      cache: "no-store",
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok && !(options.accept || []).includes(response.status)) {
      const field = data && data.field ? ` (${data.field})` : "";
      const error = new Error(`${response.status} ${(data && (data.detail || data.error)) || ""}${field}`);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  /** Run an action with a busy note; errors go to the alert box. */
  async function busy(action) {
    $("error").hidden = true;
    say(t("loading"));
    try {
      await action();
      say("");
    } catch (error) {
      fail(error);
    }
  }

  function table(headers, rows) {
    return el("table", {},
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))));
  }

  /** A plain object as a definition list (nested objects nested, two levels; then JSON). */
  function facts(object, depth = 0) {
    const show = (value) => {
      if (value === null || value === undefined) return "—";
      if (Array.isArray(value)) return value.map((v) => (typeof v === "object" ? JSON.stringify(v) : String(v))).join(", ");
      if (typeof value === "object") return depth < 2 ? facts(value, depth + 1) : JSON.stringify(value);
      return String(value);
    };
    return el("dl", { class: "facts" }, Object.entries(object || {}).map(([key, value]) => [
      el("dt", {}, key), el("dd", {}, show(value)),
    ]));
  }

  const when = (iso) => (iso ? new Date(iso).toLocaleString(lang) : "—");

  // ---- sign-in and navigation --------------------------------------------------------------

  /** Check the token with one call its kind may make, then show that kind's views. */
  async function signIn(token, asAdmin) {
    sessionStorage.setItem("km.token", token);
    try {
      await api(asAdmin ? "/v1/admin/tenants" : "/v1/stats");
    } catch (error) {
      sessionStorage.removeItem("km.token");
      throw new Error(`${t("bad_token")} (${error.message})`);
    }
    role = asAdmin ? "admin" : "tenant";
    sessionStorage.setItem("km.role", role);
    showApp();
  }

  function signOut() {
    sessionStorage.removeItem("km.token");
    sessionStorage.removeItem("km.role");
    role = null;
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
      button.hidden = Boolean(button.dataset.role) && button.dataset.role !== role;
    }
    applyTexts();
    const wanted = location.hash.slice(1);
    const allowed = [...$("nav").querySelectorAll("button:not([hidden])")].map((b) => b.dataset.view);
    show(allowed.includes(wanted) ? wanted : role === "admin" ? "admin" : allowed[0]);
  }

  const loaders = {};

  function show(view) {
    for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
    for (const button of $("nav").querySelectorAll("button")) {
      button.setAttribute("aria-current", button.dataset.view === view ? "page" : "false");
    }
    history.replaceState(null, "", `#${view}`);
    if (loaders[view]) busy(loaders[view]);
  }

  // ---- memories ----------------------------------------------------------------------------

  const memories = { items: [], cursor: null };

  loaders.memories = async () => {
    memories.items = [];
    memories.cursor = null;
    $("memory-detail").hidden = true;
    $("memory-list").hidden = false;
    $("memory-tools").hidden = false;
    await loadMore();
  };

  async function loadMore() {
    const query = memories.cursor ? `&cursor=${encodeURIComponent(memories.cursor)}` : "";
    const page = await api(`/v1/memories?limit=100${query}`);
    memories.items.push(...page.items);
    memories.cursor = page.next_cursor;
    renderList();
  }

  function matches(memory) {
    const type = $("f-type").value;
    const tag = $("f-tag").value.trim().toLowerCase();
    const source = $("f-source").value.trim().toLowerCase();
    const from = $("f-from").value;
    const to = $("f-to").value;
    const created = memory.created_at.slice(0, 10);
    return (!type || memory.memory_type === type)
      && (!tag || memory.tags.some((x) => x.toLowerCase() === tag))
      && (!source || (memory.source || "").toLowerCase().includes(source))
      && (!from || created >= from) && (!to || created <= to);
  }

  function renderList() {
    const shown = memories.items.filter(matches);
    const rows = shown.map((m) => [
      el("button", { type: "button", class: "link", onclick: () => busy(() => openMemory(m.id)) },
        m.title || m.content.slice(0, 60)),
      m.memory_type, m.tags.join(", "), m.source || "—", when(m.created_at),
    ]);
    const list = $("memory-list");
    fill(list,
      el("h2", {}, t("v_memories")),
      el("p", { class: "note" }, `${shown.length} ${t("shown_of")} ${memories.items.length}`),
      shown.length ? table([t("col_title"), t("col_type"), t("col_tags"), t("col_source"), t("col_created")], rows)
        : el("p", {}, t("none_found")),
      memories.cursor ? el("button", { type: "button", onclick: () => busy(loadMore) }, t("load_more")) : null,
    );
  }

  async function openMemory(id) {
    const memory = await api(`/v1/memories/${id}`);
    const { relations } = await api(`/v1/nodes/${id}/relations`);
    const mentioned = relations.filter((r) => r.predicate === "MENTIONS" && r.node.kind === "entity");
    const others = relations.filter((r) => !mentioned.includes(r));
    const detail = $("memory-detail");
    const receipt = el("div", { id: "receipt" });
    fill(detail,
      el("button", { type: "button", onclick: () => busy(loaders.memories) }, t("back")),
      el("h2", { tabindex: "-1" }, `${t("memory")}: ${memory.title || memory.id}`),
      el("pre", { class: "content", id: "memory-content" }, memory.content),
      facts({
        id: memory.id, [t("col_type")]: memory.memory_type, [t("col_tags")]: memory.tags.join(", "),
        [t("col_source")]: memory.source || "—", [t("chunks")]: memory.chunks,
        [t("valid")]: `${when(memory.valid_from)} – ${memory.valid_to ? when(memory.valid_to) : "…"}`,
        [t("document")]: memory.document_id || "—",
      }),
      el("h3", {}, t("entities")),
      el("ul", { id: "memory-entities" }, mentioned.map((r) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => openGraph(r.node) },
          `${r.node.title_or_name} (${r.node.entity_class})`)))),
      el("h3", {}, t("relations")),
      others.length ? table([t("stage"), t("node")], others.map((r) => [
        `${r.direction === "out" ? "→" : "←"} ${r.predicate}`, r.node.title_or_name || r.node.id])) : el("p", {}, "—"),
      supersedeForm(memory),
      el("h3", {}, t("erase")),
      eraseButton(memory.id, receipt),
      receipt,
    );
    $("memory-list").hidden = true;
    $("memory-tools").hidden = true;
    detail.hidden = false;
    detail.querySelector("h2").focus(); // keyboard users land on what they opened
  }

  function supersedeForm(memory) {
    const content = el("textarea", { id: "s-content", rows: 3 });
    const reason = el("input", { id: "s-reason" });
    const out = el("p", { class: "note" });
    const form = el("form", { class: "sub" },
      el("h3", {}, t("supersede")),
      el("label", { for: "s-content" }, t("new_content")), content,
      el("label", { for: "s-reason" }, t("reason")), reason,
      el("button", { type: "submit" }, t("supersede_submit")), out);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(async () => {
        const body = { new_content: content.value };
        if (reason.value.trim()) body.update_reason = reason.value.trim();
        const done = await api(`/v1/memories/${memory.id}/supersede`, { method: "POST", body });
        fill(out, `${t("superseded")} `,
          el("button", { type: "button", class: "link", onclick: () => busy(() => openMemory(done.id)) }, done.id));
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

  async function upload(event) {
    event.preventDefault();
    const file = $("d-file").files[0];
    const content = file ? await file.text() : $("d-content").value;
    const body = { content };
    const title = $("d-title").value.trim() || (file ? file.name : "");
    if (title) body.title = title;
    if ($("d-source").value.trim()) body.source = $("d-source").value.trim();
    const done = await api("/v1/documents?wait=true", { method: "POST", body });
    $("upload-result").textContent = `${t("uploaded")}: ${done.status}, ${t("chunks")}: ${done.chunks}`;
    await loaders.memories();
  }

  // ---- recall ------------------------------------------------------------------------------

  function stageBoxes(fieldset, suffix, checked) {
    for (const stage of STAGES) {
      const id = `st-${suffix}-${stage}`;
      fieldset.append(el("span", { class: "check" },
        el("input", { type: "checkbox", id, value: stage, checked: checked(stage) }),
        el("label", { for: id, class: "inline" }, stage)));
    }
  }

  const chosenStages = (fieldset) => [...fieldset.querySelectorAll("input:checked")].map((i) => i.value);

  async function recall() {
    const settings = [chosenStages($("stages-a"))];
    if ($("r-compare").checked) settings.push(chosenStages($("stages-b")));
    const k = Number($("r-k").value) || 5;
    const outcomes = await Promise.all(settings.map((stages) => api("/v1/recall", {
      method: "POST",
      body: { query: $("r-query").value, k, explain: true, ...(stages.length ? { stages } : {}) },
    })));
    fill($("recall-out"), ...outcomes.map((outcome, i) =>
      recallPanel(outcome, settings[i], t(i ? "setting_b" : "setting_a"))));
  }

  function recallPanel(outcome, stages, name) {
    const fusion = (outcome.explain && outcome.explain.fusion) || { stages: {} };
    const reported = Object.keys((outcome.results[0] || {}).stages || {});
    const used = STAGES.filter((stage) => reported.includes(stage) && (!stages.length || stages.includes(stage)));
    const rows = outcome.results.map((hit, i) => [
      String(i + 1), el("span", { class: "hit" }, hit.title || hit.content.slice(0, 80)), hit.score.toFixed(4),
      el("span", { class: "ranks" }, used.map((stage) => {
        const rank = hit.stages[stage];
        return el("span", { class: rank ? "rank" : "rank off" }, `${stage}: ${rank ?? "—"}`);
      })),
    ]);
    const weights = Object.entries(fusion.stages).map(([stage, w]) => [
      stage, String(w.weight), String(w.depth), w.p_quality ?? "—", w.rule || "—",
      Object.entries(w.signals || {}).map(([key, value]) => `${key}=${value}`).join(", "),
    ]);
    const explain = outcome.explain || {};
    const rest = Object.fromEntries(Object.entries(explain)
      .filter(([key]) => !["fusion", "matched_entities", "seeds", "ppr_top"].includes(key)));
    return el("div", { class: "card recall-panel" },
      el("h2", {}, `${name}: ${stages.join(", ") || STAGES.join(", ")}`),
      el("p", { class: outcome.degraded ? "bad" : "note" },
        outcome.degraded ? `${t("degraded")}: ${outcome.degraded_reasons.join("; ")}` : t("not_degraded")),
      el("h3", {}, t("ranking")),
      table([t("rank"), t("col_title"), t("score"), t("stage_ranks")], rows),
      el("h3", {}, t("timings")), timingBars(outcome.timings_ms),
      el("h3", {}, t("weights")),
      table([t("stage"), t("weight"), t("depth"), t("p_quality"), t("rule"), t("signals")], weights),
      el("h3", {}, t("matched")),
      el("ul", {}, (explain.matched_entities || []).map((m) => el("li", {}, `${m.name} (${m.entity_class}, ${m.score})`))),
      el("h3", {}, t("seeds")),
      el("ul", {}, (explain.seeds || []).map((s) => el("li", {}, `${s.id}: ${s.weight}`))),
      el("h3", {}, t("explain_other")), facts(rest));
  }

  function timingBars(timings) {
    // The CSP forbids inline style attributes; widths are set through the CSSOM, which it allows.
    const total = Math.max(...Object.values(timings), 1);
    const box = el("div", { class: "bars", role: "list" });
    for (const [stage, ms] of Object.entries(timings)) {
      const bar = el("span", { class: "bar" });
      bar.style.width = `${Math.max(1, (100 * ms) / total)}%`;
      box.append(el("div", { class: "bar-row", role: "listitem" },
        el("span", { class: "bar-label" }, stage), el("span", { class: "bar-track" }, bar),
        el("span", { class: "bar-value" }, `${ms.toFixed(1)} ms`)));
    }
    return box;
  }

  // ---- graph -------------------------------------------------------------------------------

  async function findEntities(event) {
    event.preventDefault();
    await busy(async () => {
      const { results } = await api(`/v1/entities?q=${encodeURIComponent($("g-q").value)}&limit=10`);
      fill($("entity-hits"), results.length ? el("ul", {}, results.map((e) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => openGraph({ id: e.id, title_or_name: e.name, entity_class: e.entity_class, kind: "entity" }) },
          `${e.name} (${e.entity_class})`)))) : el("p", {}, t("none_found")));
    });
  }

  function openGraph(node) {
    show("graph");
    KMGraph.reset(node);
    busy(() => expandNode(node.id));
  }

  async function expandNode(id) {
    const { relations } = await api(`/v1/nodes/${id}/relations`);
    const asOf = $("g-asof").value ? new Date($("g-asof").value) : null;
    const kept = [];
    for (const r of relations) {
      if (asOf && r.node.kind === "memory" && !(await validAt(r.node.id, asOf))) continue;
      kept.push(r);
    }
    KMGraph.expand(id, kept);
    const select = $("g-rel");
    const known = new Set([...select.options].map((o) => o.value));
    for (const predicate of KMGraph.predicates()) {
      if (!known.has(predicate)) select.append(el("option", { value: predicate }, predicate));
    }
    selectNode(id);
  }

  const validity = new Map();

  async function validAt(memoryId, moment) {
    if (!validity.has(memoryId)) {
      const m = await api(`/v1/memories/${memoryId}`, { accept: [404] });
      validity.set(memoryId, m && m.valid_from ? [new Date(m.valid_from), m.valid_to ? new Date(m.valid_to) : null] : null);
    }
    const span = validity.get(memoryId);
    return Boolean(span) && span[0] <= moment && (!span[1] || moment < span[1]);
  }

  function selectNode(id) {
    const node = KMGraph.node(id);
    if (!node) return;
    const memories = KMGraph.neighbours(id).filter((n) => n.kind === "memory");
    fill($("node-panel"),
      el("h2", {}, node.label),
      facts({ id: node.id, kind: node.kind, class: node.entity_class || "—" }),
      el("button", { type: "button", onclick: () => busy(() => expandNode(id)) }, t("expand")),
      node.kind === "memory"
        ? el("button", { type: "button", onclick: () => { show("memories"); busy(() => openMemory(id)); } }, t("open"))
        : null,
      el("h3", {}, t("mentioned_in")),
      el("ul", {}, memories.map((m) => el("li", {}, el("button", {
        type: "button", class: "link", onclick: () => { show("memories"); busy(() => openMemory(m.id)); },
      }, m.label)))),
    );
  }

  // ---- answers -----------------------------------------------------------------------------

  async function answer(event) {
    event.preventDefault();
    await busy(async () => {
      const body = { question: $("a-q").value, method: $("a-method").value, k: Number($("a-k").value) || 3, max_tokens: 64 };
      const result = await api("/v1/answer", { method: "POST", body });
      const out = $("answer-out");
      out.hidden = false;
      fill(out,
        el("h2", {}, t("answer")),
        el("p", { id: "answer-text", class: "answer" }, ...withMarkers(result.answer || t("no_answer"))),
        el("p", { class: result.supported ? "note" : "bad" }, t(result.supported ? "supported" : "unsupported")),
        result.degraded ? el("p", { class: "bad" }, `${t("degraded")}: ${result.degraded_reasons.join("; ")}`) : null,
        el("h3", {}, t("citations")),
        el("ul", {}, result.citations.map((c) => el("li", {},
          el("a", { href: `#passage-${c.marker}`, onclick: jumpTo(c.marker) }, `[${c.marker}] ${c.title || c.memory_id}`)))),
        el("h3", {}, t("passages")),
        el("ol", { class: "passages" }, result.passages.map((p) => el("li", { id: `passage-${p.marker}`, tabindex: "-1" },
          el("strong", {}, `[${p.marker}] ${p.title || ""}`), el("p", {}, p.content)))),
        facts({ method: result.method, model: result.model, ...result.timings_ms }),
      );
    });
  }

  /** The answer's text with [n] markers as links to the passages. */
  function withMarkers(text) {
    return text.split(/(\[\d+\])/).map((part) => {
      const marker = /^\[(\d+)\]$/.exec(part);
      return marker ? el("a", { href: `#passage-${marker[1]}`, onclick: jumpTo(marker[1]) }, part) : part;
    });
  }

  const jumpTo = (marker) => (event) => {
    event.preventDefault();
    const target = document.getElementById(`passage-${marker}`);
    if (target) { target.focus(); target.classList.add("flash"); }
  };

  // ---- operations and admin ----------------------------------------------------------------

  loaders.operations = async () => {
    const ready = await fetch("/ready", { cache: "no-store" }).then((r) => r.json());
    const cards = [el("div", { class: "card", id: "ops-ready" }, el("h2", {}, t("ready")), facts({ status: ready.status, ...ready.checks, graph_mirror: ready.graph_mirror }))];
    if (role === "tenant") {
      const stats = await api("/v1/stats");
      cards.unshift(el("div", { class: "card", id: "ops-stats" }, el("h2", {}, t("stats")), facts(stats)));
    } else {
      const health = await api("/health/detail");
      cards.push(el("div", { class: "card", id: "ops-health" }, el("h2", {}, t("health")), facts(health)));
    }
    fill($("ops-out"), ...cards);
  };

  loaders.admin = async () => {
    const tenants = await api("/v1/admin/tenants");
    fill($("tenant-list"), el("h2", {}, t("tenants")), table(
      [t("t_name"), t("t_language"), t("t_created"), t("scopes"), ""],
      tenants.map((tenant) => {
        const boxes = ["read", "write", "admin"].map((scope) => {
          const id = `scope-${tenant.id}-${scope}`;
          return el("span", { class: "check" },
            el("input", { type: "checkbox", id, value: scope, checked: scope !== "admin" }),
            el("label", { for: id, class: "inline" }, scope));
        });
        const issue = el("button", { type: "button", "data-tenant": tenant.name, onclick: () => busy(() => issueToken(tenant, boxes)) }, t("issue_token"));
        return [tenant.name, tenant.language, when(tenant.created_at), el("span", {}, boxes), issue];
      }),
    ));
  };

  async function issueToken(tenant, boxes) {
    const scopes = boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
    const issued = await api(`/v1/admin/tenants/${tenant.id}/tokens`, { method: "POST", body: { scopes } });
    const out = $("token-out");
    out.hidden = false;
    const revoke = el("button", { type: "button", class: "danger", onclick: () => busy(async () => {
      await api(`/v1/admin/tokens/${issued.id}`, { method: "DELETE" });
      revoke.disabled = true;
      revoke.textContent = t("revoked");
    }) }, t("revoke"));
    fill(out,
      el("h2", {}, `${t("tokens")}: ${tenant.name}`),
      el("label", { for: "issued-token" }, t("issued")),
      el("input", { id: "issued-token", readonly: true, value: issued.token, class: "wide" }),
      facts({ id: issued.id, scopes: issued.scopes.join(", ") }),
      el("button", { type: "button", id: "use-token", onclick: () => busy(() => signIn(issued.token, false)) }, t("use_token")),
      revoke,
    );
  }

  // ---- wiring ------------------------------------------------------------------------------

  function onSubmit(id, action) {
    $(id).addEventListener("submit", (event) => {
      event.preventDefault();
      busy(() => action(event));
    });
  }

  function start() {
    $("lang").value = lang;
    $("lang").addEventListener("change", () => {
      lang = $("lang").value;
      localStorage.setItem("km.lang", lang);
      applyTexts();
    });
    onSubmit("signin-form", async () => {
      const token = $("token").value.trim();
      $("token").value = "";
      await signIn(token, $("kind-admin").checked);
    });
    $("signout").addEventListener("click", signOut);
    for (const button of $("nav").querySelectorAll("button")) button.addEventListener("click", () => show(button.dataset.view));
    onSubmit("filter-form", async () => renderList());
    onSubmit("upload-form", upload);
    stageBoxes($("stages-a"), "a", () => true);
    stageBoxes($("stages-b"), "b", (stage) => stage !== "graph");
    $("r-compare").addEventListener("change", () => { $("stages-b").disabled = !$("r-compare").checked; });
    onSubmit("recall-form", recall);
    $("entity-form").addEventListener("submit", findEntities);
    $("g-rel").addEventListener("change", () => KMGraph.filter($("g-rel").value));
    $("answer-form").addEventListener("submit", answer);
    $("ops-refresh").addEventListener("click", () => busy(loaders.operations));
    onSubmit("tenant-form", async () => {
      const body = { name: $("t-name").value.trim() };
      if ($("t-lang").value.trim()) body.language = $("t-lang").value.trim();
      await api("/v1/admin/tenants", { method: "POST", body });
      $("t-name").value = "";
      await loaders.admin();
    });
    onSubmit("revoke-form", async () => {
      await api(`/v1/admin/tokens/${encodeURIComponent($("revoke-id").value.trim())}`, { method: "DELETE" });
      say(t("revoked"));
    });
    KMGraph.init($("graph"), { onSelect: selectNode, onExpand: (id) => busy(() => expandNode(id)) });
    role = sessionStorage.getItem("km.token") ? sessionStorage.getItem("km.role") : null;
    applyTexts();
    if (role) showApp();
  }

  return { start };
})();

document.addEventListener("DOMContentLoaded", KM.start);
