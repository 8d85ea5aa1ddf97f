// Recall: a question, each result with its snippet (the question's words marked), a line in
// plain words on how it was found, the 0–1 score; the technical explain one click away; two
// settings side by side.
import { $, api, busy, el, facts, fill, highlight, humanise, queryWords, relationCatalogue, snippet, t, table, views } from "./core.js";

export const STAGES = ["bm25", "vector", "graph", "statements", "identity", "relations", "time"];

export function stageBoxes(fieldset, suffix, checked) {
  for (const stage of STAGES) {
    const id = `st-${suffix}-${stage}`;
    fieldset.append(el("span", { class: "check" },
      el("input", { type: "checkbox", id, value: stage, checked: checked(stage) }),
      el("label", { for: id, class: "inline", "data-i18n": `stage_${stage}` }, t(`stage_${stage}`))));
  }
}

const chosenStages = (fieldset) => [...fieldset.querySelectorAll("input:checked")].map((i) => i.value);

export async function recall() {
  const settings = [chosenStages($("stages-a"))];
  if ($("r-compare").checked) settings.push(chosenStages($("stages-b")));
  const k = Number($("r-k").value) || 5;
  const minScore = Number($("r-min").value) || 0;
  const query = $("r-query").value;
  const [catalogue, ...outcomes] = await Promise.all([relationCatalogue(), ...settings.map((stages) => api("/v1/recall", {
    method: "POST",
    body: { query, k, min_score: minScore, explain: true, ...(stages.length ? { stages } : {}) },
  }))]);
  const words = queryWords(query);
  fill($("recall-out"), ...outcomes.map((outcome, i) =>
    recallPanel(outcome, settings[i], t(i ? "setting_b" : "setting_a"), words, catalogue)));
}

/** Names of the nodes the explain knows: matched entities and the relation paths' ends. */
function namesOf(explain) {
  const names = new Map();
  for (const m of explain.matched_entities || []) names.set(m.id, m.name);
  for (const m of explain.identity_entities || []) if (m.id && m.name) names.set(m.id, m.name);
  return names;
}

/** "found by full text and the graph: Anna → works on → Atlas" for one result. */
function foundBy(hit, explain, catalogue) {
  const stages = Object.entries(hit.stages || {}).filter(([, rank]) => rank).map(([stage]) => t(`by_${stage}`));
  const joined = stages.length > 1 ? `${stages.slice(0, -1).join(", ")} ${t("and")} ${stages.at(-1)}` : stages[0] || t("by_ranker");
  const path = (explain.relation_paths || []).find((p) => p.memories.includes(hit.memory_id));
  const walk = path ? `: ${path.path.map((step, i) => (i % 2 ? humanise(step, catalogue.labels) : step)).join(" → ")}` : "";
  return `${t("found_by")} ${joined}${walk}`;
}

function scoreBar(score) {
  const bar = el("span", { class: "bar" });
  bar.style.width = `${Math.round(100 * score)}%`; // the CSSOM: the CSP allows it
  return el("span", { class: "score", title: t("score_hint") },
    el("span", { class: "bar-track", "aria-hidden": "true" }, bar), ` ${score.toFixed(2)}`);
}

function resultItem(hit, i, explain, words, catalogue) {
  return el("li", { class: "hit" },
    el("div", { class: "hit-head" },
      el("button", { type: "button", class: "link hit-title", onclick: () => { views.show("memories"); busy(() => views.openMemory(hit.memory_id)); } },
        `${i + 1}. ${hit.title || snippet(hit.content, 60)}`),
      scoreBar(hit.score)),
    el("p", { class: "snippet" }, highlight(snippet(hit.content, 320), words)),
    el("p", { class: "found note" }, foundBy(hit, explain, catalogue)));
}

function recallPanel(outcome, stages, name, words, catalogue) {
  const explain = outcome.explain || {};
  const names = namesOf(explain);
  return el("div", { class: "card recall-panel" },
    el("h2", {}, `${name}: ${(stages.length ? stages : STAGES).map((s) => t(`stage_${s}`)).join(", ")}`),
    outcome.degraded ? el("p", { class: "bad" }, `${t("degraded")}: ${outcome.degraded_reasons.join("; ")}`) : null,
    (explain.matched_entities || []).length
      ? el("p", { class: "note" }, `${t("matched")}: ${explain.matched_entities.map((m) => m.name).join(", ")}`) : null,
    outcome.results.length ? el("ol", { class: "hits" }, outcome.results.map((hit, i) => resultItem(hit, i, explain, words, catalogue)))
      : el("p", {}, t("none_found")),
    el("details", { class: "explain" }, el("summary", {}, t("technical")), technical(outcome, stages, names)));
}

function technical(outcome, stages, names) {
  const explain = outcome.explain || {};
  const fusion = explain.fusion || { stages: {} };
  const reported = Object.keys((outcome.results[0] || {}).stages || {});
  const used = STAGES.filter((stage) => reported.includes(stage) && (!stages.length || stages.includes(stage)));
  const rows = outcome.results.map((hit, i) => [
    String(i + 1), hit.title || snippet(hit.content, 50), hit.score.toFixed(4), hit.fused.toFixed(3),
    el("span", { class: "ranks" }, used.map((stage) => {
      const rank = hit.stages[stage];
      return el("span", { class: rank ? "rank" : "rank off" }, `${stage}: ${rank ?? "—"}`);
    })),
  ]);
  const weights = Object.entries(fusion.stages || {}).map(([stage, w]) => [
    stage, String(w.weight), String(w.depth), w.p_quality ?? "—", w.rule || "—",
    Object.entries(w.signals || {}).map(([key, value]) => `${key}=${value}`).join(", "),
  ]);
  const rest = Object.fromEntries(Object.entries(explain)
    .filter(([key]) => !["fusion", "matched_entities", "seeds", "ppr_top", "relation_paths"].includes(key)));
  const named = (id) => names.get(id) || id;
  return [
    el("p", { class: outcome.degraded ? "bad" : "note" }, outcome.degraded ? t("degraded") : t("not_degraded")),
    el("h3", {}, t("ranking")),
    table([t("rank"), t("col_title"), t("score"), t("fused"), t("stage_ranks")], rows),
    el("h3", {}, t("timings")), timingBars(outcome.timings_ms),
    el("h3", {}, t("weights")),
    table([t("stage"), t("weight"), t("depth"), t("p_quality"), t("rule"), t("signals")], weights),
    el("h3", {}, t("matched")),
    el("ul", {}, (explain.matched_entities || []).map((m) => el("li", {}, `${m.name} (${m.entity_class}, ${m.score})`))),
    el("h3", {}, t("paths")),
    el("ul", {}, (explain.relation_paths || []).map((p) => el("li", {}, `${p.path.join(" → ")} (${p.score})`))),
    el("h3", {}, t("seeds")),
    el("ul", {}, (explain.seeds || []).map((s) => el("li", {}, `${named(s.id)}: ${s.weight}`))),
    el("h3", {}, t("explain_other")), facts(rest),
  ];
}

function timingBars(timings) {
  // The CSP forbids inline style attributes; widths are set through the CSSOM, which it allows.
  const total = Math.max(...Object.values(timings || {}), 1);
  const box = el("div", { class: "bars", role: "list" });
  for (const [stage, ms] of Object.entries(timings || {})) {
    const bar = el("span", { class: "bar" });
    bar.style.width = `${Math.max(1, (100 * ms) / total)}%`;
    box.append(el("div", { class: "bar-row", role: "listitem" },
      el("span", { class: "bar-label" }, stage), el("span", { class: "bar-track" }, bar),
      el("span", { class: "bar-value" }, `${ms.toFixed(1)} ms`)));
  }
  return box;
}

export function wireRecall(onSubmit) {
  stageBoxes($("stages-a"), "a", () => true);
  stageBoxes($("stages-b"), "b", (stage) => stage !== "graph");
  $("r-compare").addEventListener("change", () => { $("stages-b").disabled = !$("r-compare").checked; });
  onSubmit("recall-form", recall);
}
