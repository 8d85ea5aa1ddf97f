// The graph view: an entity's neighbourhood drawn as SVG with a small force-directed layout.
// Nodes are focusable (Tab), Enter or a click selects and expands them. Labels are text nodes.
"use strict";

window.KMGraph = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 760;
  const H = 520;
  let svg = null;
  let hooks = {};
  let nodes = new Map(); // id -> {id, label, kind, entity_class, x, y}
  let edges = new Map(); // "a|b" (one line per pair of nodes) -> {from, to, predicates: Set}
  let only = "";

  const make = (tag, attrs) => {
    const node = document.createElementNS(NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    return node;
  };

  function init(element, callbacks) {
    svg = element;
    hooks = callbacks;
  }

  function reset(root) {
    nodes = new Map();
    edges = new Map();
    add(root, W / 2, H / 2);
    draw();
  }

  function add(ref, x, y) {
    if (!nodes.has(ref.id)) {
      nodes.set(ref.id, {
        id: ref.id, label: ref.title_or_name || ref.label || ref.id.slice(0, 8),
        kind: ref.kind, entity_class: ref.entity_class, x, y,
      });
    }
    return nodes.get(ref.id);
  }

  /** Add a node's relations: new neighbours on a ring around it, then relax the layout. */
  function expand(id, relations) {
    const centre = nodes.get(id) || add({ id, kind: "entity" }, W / 2, H / 2);
    relations.forEach((r, i) => {
      const angle = (2 * Math.PI * i) / Math.max(relations.length, 1);
      add(r.node, centre.x + 120 * Math.cos(angle), centre.y + 120 * Math.sin(angle));
      const [from, to] = r.direction === "out" ? [id, r.node.id] : [r.node.id, id];
      const key = [from, to].sort().join("|"); // an edge and its inverse share one line
      if (!edges.has(key)) edges.set(key, { from, to, predicates: new Set() });
      edges.get(key).predicates.add(r.predicate);
    });
    relax(120);
    draw();
  }

  function relax(rounds) {
    const list = [...nodes.values()];
    for (let round = 0; round < rounds; round++) {
      for (const a of list) {
        let fx = (W / 2 - a.x) * 0.002;
        let fy = (H / 2 - a.y) * 0.002;
        for (const b of list) {
          if (a === b) continue;
          const dx = a.x - b.x || 0.1;
          const dy = a.y - b.y || 0.1;
          const d2 = Math.max(dx * dx + dy * dy, 25);
          fx += (6000 * dx) / d2 / Math.sqrt(d2);
          fy += (6000 * dy) / d2 / Math.sqrt(d2);
        }
        a.fx = fx;
        a.fy = fy;
      }
      for (const e of edges.values()) {
        const a = nodes.get(e.from);
        const b = nodes.get(e.to);
        const dx = b.x - a.x;
        const dy = b.y - a.y;
        const d = Math.sqrt(dx * dx + dy * dy) || 1;
        const pull = (d - 150) * 0.02;
        a.fx += (pull * dx) / d; a.fy += (pull * dy) / d;
        b.fx -= (pull * dx) / d; b.fy -= (pull * dy) / d;
      }
      for (const a of list) {
        a.x = Math.min(W - 40, Math.max(40, a.x + Math.max(-10, Math.min(10, a.fx))));
        a.y = Math.min(H - 20, Math.max(20, a.y + Math.max(-10, Math.min(10, a.fy))));
      }
    }
  }

  const visible = (e) => !only || e.predicates.has(only);

  function draw() {
    const focused = document.activeElement && document.activeElement.getAttribute("data-id");
    svg.replaceChildren();
    const shown = new Set();
    for (const e of edges.values()) {
      if (!visible(e)) continue;
      shown.add(e.from); shown.add(e.to);
      const a = nodes.get(e.from);
      const b = nodes.get(e.to);
      svg.append(make("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge" }));
      const label = make("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, class: "edge-label" });
      label.textContent = [...e.predicates].join(" / ");
      svg.append(label);
    }
    const first = nodes.keys().next().value;
    for (const n of nodes.values()) {
      if (only && !shown.has(n.id) && n.id !== first) continue;
      const g = make("g", {
        class: `node ${n.kind}`, tabindex: "0", role: "button", "data-id": n.id,
        "aria-label": `${n.label} (${n.entity_class || n.kind})`,
      });
      g.append(make("circle", { cx: n.x, cy: n.y, r: n.kind === "memory" ? 9 : 13 }));
      const text = make("text", { x: n.x + 16, y: n.y + 5 });
      text.textContent = n.label.length > 28 ? `${n.label.slice(0, 27)}…` : n.label;
      g.append(text);
      g.addEventListener("click", () => hooks.onExpand(n.id));
      g.addEventListener("focus", () => hooks.onSelect(n.id));
      g.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          hooks.onExpand(n.id);
        }
      });
      svg.append(g);
      if (n.id === focused) g.focus();
    }
  }

  function filter(predicate) {
    only = predicate;
    draw();
  }

  const predicates = () => [...new Set([...edges.values()].flatMap((e) => [...e.predicates]))].sort();
  const node = (id) => nodes.get(id);

  function neighbours(id) {
    const out = [];
    for (const e of edges.values()) {
      if (e.from === id) out.push(nodes.get(e.to));
      else if (e.to === id) out.push(nodes.get(e.from));
    }
    return [...new Set(out)];
  }

  return { init, reset, expand, filter, predicates, node, neighbours };
})();
