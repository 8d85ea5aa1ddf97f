// The console's shared helpers: texts, the DOM builder, the API client, busy/alert handling.
// Every piece of data reaches the page through text nodes (el() below), never as HTML: memory
// content is untrusted.

export const $ = (id) => document.getElementById(id);

export const session = {
  lang: localStorage.getItem("km.lang") || (navigator.language || "en").slice(0, 2),
  role: null, // "tenant" | "admin"
};
if (!window.KM_TEXTS[session.lang]) session.lang = "en";

export const t = (key) => window.KM_TEXTS[session.lang][key] || window.KM_TEXTS.en[key] || key;

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attrs, ...children) {
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
export function fill(target, ...children) {
  target.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
}

export function say(message) {
  $("status").textContent = message || "";
}

export function fail(error) {
  say("");
  const box = $("error");
  box.hidden = false;
  box.textContent = `${t("error")}: ${error.message || error}`;
}

function headers(json) {
  const token = sessionStorage.getItem("km.token");
  const out = { Accept: json ? "application/json" : "text/event-stream" };
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function request(path, options, accept) {
  const head = headers(accept === "json");
  if (options.body !== undefined) head["Content-Type"] = "application/json";
  return fetch(path, {
    method: options.method || "GET",
    headers: head,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "omit",
    cache: "no-store",
  });
}

function refusal(response, data) {
  const field = data && data.field ? ` (${data.field})` : "";
  const error = new Error(`${response.status} ${(data && (data.detail || data.error)) || ""}${field}`);
  error.status = response.status;
  return error;
}

/** Same-origin JSON call with the session's bearer token. */
export async function api(path, options = {}) {
  const response = await request(path, options, "json");
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok && !(options.accept || []).includes(response.status)) throw refusal(response, data);
  return data;
}

/** A POST answered with server-sent events: onEvent(name, data) per event, in order. */
export async function stream(path, body, onEvent) {
  const response = await request(path, { method: "POST", body }, "sse");
  if (!response.ok) {
    const text = await response.text();
    throw refusal(response, text ? JSON.parse(text) : null);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, end), onEvent);
      buffer = buffer.slice(end + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    const colon = line.indexOf(":");
    if (colon === 0) continue; // a comment (keep-alive)
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (data.length) onEvent(name, data.join("\n"));
}

/** Run an action with a busy note; errors go to the alert box. */
export async function busy(action) {
  $("error").hidden = true;
  say(t("loading"));
  try {
    await action();
    say("");
  } catch (error) {
    fail(error);
  }
}

export function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { "data-label": headers[i] }, c))))));
}

/** A plain object as a definition list (nested objects nested, two levels; then JSON). */
export function facts(object, depth = 0) {
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

export const when = (iso) => (iso ? new Date(iso).toLocaleString(session.lang) : "—");

/** "WORKS_ON" as "works on" (the catalogue's own label, in the page's language, when known). */
export function humanise(predicate, labels) {
  const known = labels && labels[predicate];
  if (known && (known[session.lang] || known.en)) return known[session.lang] || known.en;
  return predicate.replace(/^\^/, "").toLowerCase().replace(/_/g, " ");
}

/** The first `size` characters of a text, cut at a word. */
export function snippet(text, size = 160) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  if (flat.length <= size) return flat;
  const cut = flat.slice(0, size);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(" "), size - 20))}…`;
}

const WORD = /[\p{L}\p{N}]+/gu;

/** The question's words (three letters or more), folded for comparison. */
export function queryWords(question) {
  return [...new Set((question.match(WORD) || []).filter((w) => w.length > 2).map((w) => w.toLocaleLowerCase()))];
}

/** A text as nodes with each word that starts like one of `words` in a <mark>. */
export function highlight(text, words) {
  if (!words.length) return [text];
  const out = [];
  let last = 0;
  for (const match of text.matchAll(WORD)) {
    const folded = match[0].toLocaleLowerCase();
    if (!words.some((w) => folded.startsWith(w) || (w.length > 4 && folded.startsWith(w.slice(0, -1))))) continue;
    out.push(text.slice(last, match.index), el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  out.push(text.slice(last));
  return out.filter((part) => part !== "");
}

/** A version-4 UUID from the browser's random numbers (randomUUID needs a secure context). */
export function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Views register a loader and may ask to open another view (set by app.js). */
export const views = { loaders: {}, show: null, openMemory: null, openGraph: null };

let catalogue = null;

/** The tenant's relation catalogue: labels of each predicate and its inverse (cached). */
export async function relationCatalogue() {
  if (!catalogue) {
    const schema = await api("/v1/schema");
    const labels = {};
    const inverse = {};
    for (const p of schema.predicates) {
      labels[p.name] = p.labels || {};
      if (p.inverse) { inverse[p.name] = p.inverse; inverse[p.inverse] = p.name; }
    }
    catalogue = { labels, inverse };
  }
  return catalogue;
}

export function forgetCatalogue() {
  catalogue = null;
}
