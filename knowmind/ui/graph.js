// The graph view: an entity's neighbourhood drawn by cytoscape.js (vendor/, MIT) with its force
// layout (cose). Each label sits inside its node's box, sized to the text, and a pass after the
// layout pushes boxes apart, so labels neither overlap nor clip; one edge per relation and its
// inverse, labelled once in reading direction. Pan and zoom with the mouse, the buttons or the
// keyboard (+, −, arrows, 0); the node list beside it reaches every node with the keyboard.
import { $, api, busy, el, fill, humanise, relationCatalogue, t, views } from "./core.js";

const FONT = "12px system-ui, sans-serif";
const MAX_LABEL = 32;
let cy = null;
let root = null;
let catalogue = { labels: {}, inverse: {} };
const expanded = new Set();
const validity = new Map();
let measure = null;

function textWidth(text) {
  measure = measure || document.createElement("canvas").getContext("2d");
  measure.font = FONT;
  return measure.measureText(text).width;
}

const STYLE = [
  { selector: "node", style: {
    shape: "round-rectangle", label: "data(label)", width: "data(w)", height: 26,
    "font-family": "system-ui, sans-serif", "font-size": 12, color: "#ffffff",
    "text-valign": "center", "text-halign": "center", "background-color": "#0b57a4",
    "border-width": 2, "border-color": "#ffffff",
  } },
  { selector: "node.memory", style: { "background-color": "#5b2d8a" } },
  { selector: "node.root", style: { "border-color": "#e8a100", "border-width": 3 } },
  { selector: "node:selected", style: { "border-color": "#e8a100", "border-width": 4 } },
  { selector: "edge", style: {
    width: 1.5, "line-color": "#7a8591", "target-arrow-color": "#7a8591", "target-arrow-shape": "triangle",
    "curve-style": "bezier", label: "data(label)", "font-size": 10, color: "#3b4450",
    "text-rotation": "autorotate", "text-background-color": "#fbfcfd", "text-background-opacity": 1,
    "text-background-padding": 2,
  } },
  { selector: ".hidden", style: { display: "none" } },
];

function ensure() {
  if (cy) return;
  cy = window.cytoscape({ container: $("graph"), style: STYLE, minZoom: 0.2, maxZoom: 4, boxSelectionEnabled: false });
  cy.on("tap", "node", (event) => activate(event.target.id()));
}

function label(ref) {
  const name = ref.title_or_name || ref.label || `${t(ref.kind === "memory" ? "memory" : "entity")} ${ref.id.slice(0, 8)}`;
  return name.length > MAX_LABEL ? `${name.slice(0, MAX_LABEL - 1)}…` : name;
}

function addNode(ref, near) {
  if (cy.getElementById(ref.id).nonempty()) return;
  const text = label(ref);
  const angle = Math.random() * 2 * Math.PI;
  cy.add({
    group: "nodes",
    data: { id: ref.id, label: text, full: ref.title_or_name || text, kind: ref.kind, entity_class: ref.entity_class || "", w: Math.ceil(textWidth(text)) + 20 },
    classes: ref.kind,
    position: near ? { x: near.x + 140 * Math.cos(angle), y: near.y + 90 * Math.sin(angle) } : { x: 0, y: 0 },
  });
}

/** An edge in the direction it reads best: of a relation and its inverse, the active form. */
function canonical(from, to, predicate) {
  const inverse = catalogue.inverse[predicate];
  if (!inverse || inverse === predicate) return { from, to, predicate };
  const passive = (p) => /^(HAS_|IS_)|_BY$/.test(p);
  const keep = passive(predicate) !== passive(inverse) ? !passive(predicate) : predicate < inverse;
  return keep ? { from, to, predicate } : { from: to, to: from, predicate: inverse };
}

function addEdge(id, r) {
  const [a, b] = r.direction === "out" ? [id, r.node.id] : [r.node.id, id];
  const e = canonical(a, b, r.predicate);
  const key = `${e.from}|${e.predicate}|${e.to}`;
  if (cy.getElementById(key).nonempty()) return;
  cy.add({ group: "edges", data: { id: key, source: e.from, target: e.to, predicate: e.predicate, label: humanise(e.predicate, catalogue.labels) } });
}

export async function openGraph(ref) {
  views.show("graph");
  ensure();
  catalogue = await relationCatalogue();
  cy.elements().remove();
  expanded.clear();
  root = ref.id;
  addNode(ref, null);
  cy.getElementById(root).addClass("root");
  await busy(() => expandNode(root));
}

/** A memory is shown as of a moment when it was valid then. */
async function validAt(memoryId, moment) {
  if (!validity.has(memoryId)) {
    const m = await api(`/v1/memories/${memoryId}`, { accept: [404] });
    validity.set(memoryId, m && m.valid_from ? [new Date(m.valid_from), m.valid_to ? new Date(m.valid_to) : null] : null);
  }
  const span = validity.get(memoryId);
  return Boolean(span) && span[0] <= moment && (!span[1] || moment < span[1]);
}

async function heldAt(r, moment) {
  if (!moment) return true;
  const from = r.valid_from ? new Date(r.valid_from) : null;
  const to = r.valid_to ? new Date(r.valid_to) : null;
  if ((from && moment < from) || (to && moment >= to)) return false;
  return r.node.kind !== "memory" || validAt(r.node.id, moment);
}

export async function expandNode(id) {
  const asOf = $("g-asof").value ? new Date($("g-asof").value) : null;
  const { relations } = await api(`/v1/nodes/${id}/relations${asOf ? "?closed=true" : ""}`);
  const kept = [];
  for (const r of relations) if (await heldAt(r, asOf)) kept.push(r);
  const centre = cy.getElementById(id).position();
  for (const r of kept) addNode(r.node, centre);
  for (const r of kept) addEdge(id, r);
  expanded.add(id);
  refreshFilter();
  relayout();
  select(id);
}

function relayout() {
  const layout = cy.layout({
    name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true, fit: false,
    idealEdgeLength: (edge) => 70 + textWidth(edge.data("label")), nodeOverlap: 40, nodeRepulsion: () => 900000,
    componentSpacing: 80, padding: 30, numIter: 1500,
  });
  layout.run();
  separate();
  cy.fit(cy.elements(":visible"), 30);
}

/** Push apart node boxes (each holds its label) that touch, until none do. */
function separate(gap = 8) {
  const list = cy.nodes(":visible").toArray();
  for (let round = 0; round < 200; round++) {
    let moved = false;
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) moved = push(list[i], list[j], gap) || moved;
    }
    if (!moved) return;
  }
}

function push(a, b, gap) {
  const pa = a.position();
  const pb = b.position();
  const dx = pb.x - pa.x;
  const dy = pb.y - pa.y;
  const overlapX = (a.width() + b.width()) / 2 + gap - Math.abs(dx);
  const overlapY = (a.height() + b.height()) / 2 + gap - Math.abs(dy);
  if (overlapX <= 0 || overlapY <= 0) return false;
  if (overlapX < overlapY) {
    const s = (dx >= 0 ? 1 : -1) * (overlapX / 2 + 0.5);
    a.position({ x: pa.x - s, y: pa.y });
    b.position({ x: pb.x + s, y: pb.y });
  } else {
    const s = (dy >= 0 ? 1 : -1) * (overlapY / 2 + 0.5);
    a.position({ x: pa.x, y: pa.y - s });
    b.position({ x: pb.x, y: pb.y + s });
  }
  return true;
}

function refreshFilter() {
  const select = $("g-rel");
  const chosen = select.value;
  const predicates = [...new Set(cy.edges().map((e) => e.data("predicate")))].sort();
  fill(select, el("option", { value: "" }, t("all")),
    predicates.map((p) => el("option", { value: p, selected: p === chosen }, humanise(p, catalogue.labels))));
  applyFilter();
}

function applyFilter() {
  const only = $("g-rel").value;
  cy.elements().removeClass("hidden");
  if (only) {
    cy.edges().filter((e) => e.data("predicate") !== only).addClass("hidden");
    cy.nodes().filter((n) => n.id() !== root && n.connectedEdges().every((e) => e.hasClass("hidden"))).addClass("hidden");
  }
  renderNodeList();
}

function activate(id) {
  const node = cy.getElementById(id);
  if (node.data("kind") === "entity" && !expanded.has(id)) busy(() => expandNode(id));
  else select(id);
}

function select(id) {
  const node = cy.getElementById(id);
  if (node.empty()) return;
  cy.nodes().unselect();
  node.select();
  const memories = node.neighborhood("node.memory:visible");
  const openMemory = (mid) => { views.show("memories"); busy(() => views.openMemory(mid)); };
  fill($("node-panel"),
    el("h2", { id: "node-title" }, node.data("full")),
    el("p", { class: "note" }, node.data("entity_class") || t("memory")),
    node.data("kind") === "entity"
      ? el("button", { type: "button", id: "node-expand", onclick: () => busy(() => expandNode(id)) }, t("expand"))
      : el("button", { type: "button", id: "node-open", onclick: () => openMemory(id) }, t("open")),
    el("h3", {}, t("mentioned_in")),
    memories.length ? el("ul", { id: "node-memories" }, memories.map((m) => el("li", {},
      el("button", { type: "button", class: "link", onclick: () => openMemory(m.id()) }, m.data("full"))))) : el("p", {}, "—"),
  );
  renderNodeList();
}

function renderNodeList() {
  const nodes = cy.nodes(":visible").sort((a, b) => a.data("label").localeCompare(b.data("label")));
  fill($("node-list"), nodes.map((n) => el("li", {},
    el("button", { type: "button", class: "link", "data-id": n.id(), "aria-pressed": n.selected() ? "true" : "false", onclick: () => activate(n.id()) },
      `${n.data("label")} (${n.data("entity_class") || t("memory")})`))));
}

function zoomBy(factor) {
  const box = $("graph").getBoundingClientRect();
  cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: box.width / 2, y: box.height / 2 } });
}

const KEYS = {
  "+": () => zoomBy(1.25), "=": () => zoomBy(1.25), "-": () => zoomBy(0.8), 0: () => cy.fit(cy.elements(":visible"), 30),
  ArrowLeft: () => cy.panBy({ x: 40, y: 0 }), ArrowRight: () => cy.panBy({ x: -40, y: 0 }),
  ArrowUp: () => cy.panBy({ x: 0, y: 40 }), ArrowDown: () => cy.panBy({ x: 0, y: -40 }),
};

async function findEntities(event) {
  event.preventDefault();
  await busy(async () => {
    const { results } = await api(`/v1/entities?q=${encodeURIComponent($("g-q").value)}&limit=10`);
    fill($("entity-hits"), results.length ? el("ul", {}, results.map((e) => el("li", {},
      el("button", { type: "button", class: "link", onclick: () => openGraph({ id: e.id, title_or_name: e.name, entity_class: e.entity_class, kind: "entity" }) },
        `${e.name} (${e.entity_class})`)))) : el("p", {}, t("none_found")));
  });
}

export function wireGraph() {
  $("entity-form").addEventListener("submit", findEntities);
  $("g-rel").addEventListener("change", () => { applyFilter(); cy.fit(cy.elements(":visible"), 30); });
  $("g-asof").addEventListener("change", () => { if (root) openGraph({ id: root, title_or_name: cy.getElementById(root).data("full"), kind: cy.getElementById(root).data("kind"), entity_class: cy.getElementById(root).data("entity_class") }); });
  $("g-zoom-in").addEventListener("click", () => cy && zoomBy(1.25));
  $("g-zoom-out").addEventListener("click", () => cy && zoomBy(0.8));
  $("g-fit").addEventListener("click", () => cy && cy.fit(cy.elements(":visible"), 30));
  $("graph").addEventListener("keydown", (event) => {
    if (cy && KEYS[event.key]) { event.preventDefault(); KEYS[event.key](); }
  });
  views.openGraph = openGraph;
  window.KMGraph = { cy: () => cy }; // read by the browser tests
}
