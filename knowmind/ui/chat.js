// Answers as a chat: threads of questions (the server keeps each by its conversation_id), the
// answer streamed as the model writes it, its [n] citations opening the memories they cite.
// The list of threads lives in this tab (sessionStorage), beside the token.
import { $, busy, el, fill, snippet, stream, t, uuid, views, when } from "./core.js";

const STORE = "km.threads";
let threads = JSON.parse(sessionStorage.getItem(STORE) || "[]");
let current = null; // the open thread

function save() {
  sessionStorage.setItem(STORE, JSON.stringify(threads));
}

function newThread() {
  current = null;
  renderThread();
  renderThreads();
  $("a-q").focus();
}

function renderThreads() {
  fill($("thread-list"), threads.length ? threads.map((thread) => el("li", {},
    el("button", {
      type: "button", class: "link", "data-id": thread.id, "aria-current": current && current.id === thread.id ? "true" : "false",
      onclick: () => { current = thread; renderThread(); renderThreads(); },
    }, `${snippet(thread.title, 48)} (${thread.turns.length})`),
    el("span", { class: "note" }, ` ${when(thread.started)}`))) : el("li", { class: "note" }, t("no_threads")));
}

function renderThread() {
  const turns = current ? current.turns : [];
  fill($("chat-log"), turns.length ? turns.map(turnNodes) : el("li", { class: "note" }, t("chat_empty")));
  $("chat-title").textContent = current ? snippet(current.title, 80) : t("new_thread");
}

function turnNodes(turn) {
  return [
    el("li", { class: "msg question" }, el("span", { class: "who-said" }, t("you")), el("p", {}, turn.question)),
    el("li", { class: "msg answer", "aria-live": "polite" }, el("span", { class: "who-said" }, `knowmind · ${turn.method || ""}`), answerBody(turn)),
  ];
}

const openCited = (memoryId) => () => { views.show("memories"); busy(() => views.openMemory(memoryId)); };

function answerBody(turn) {
  if (!turn.result) return el("p", { class: "answer-text streaming" }, turn.partial || "…");
  const r = turn.result;
  const cited = new Map(r.citations.map((c) => [String(c.marker), c]));
  return [
    el("p", { class: "answer-text" }, withMarkers(r.answer || t("no_answer"), cited)),
    el("p", { class: r.supported ? "note" : "bad" }, t(r.supported ? "supported" : "unsupported")),
    r.degraded ? el("p", { class: "bad" }, `${t("degraded")}: ${r.degraded_reasons.join("; ")}`) : null,
    r.citations.length ? el("ul", { class: "citations", "aria-label": t("citations") }, r.citations.map((c) => el("li", {},
      el("button", { type: "button", class: "link cite", "data-memory": c.memory_id, onclick: openCited(c.memory_id) },
        `[${c.marker}] ${c.title || t("memory")}`)))) : null,
    el("details", {}, el("summary", {}, `${t("passages")} (${r.passages.length})`),
      el("ol", { class: "passages" }, r.passages.map((p) => el("li", {},
        el("button", { type: "button", class: "link passage", "data-memory": p.memory_id, onclick: openCited(p.memory_id) },
          `[${p.marker}] ${p.title || t("memory")}`),
        el("p", {}, p.content))))),
  ];
}

/** The answer's text with each cited [n] as a button that opens the cited memory. */
function withMarkers(text, cited) {
  return text.split(/(\[\d+\])/).map((part) => {
    const marker = /^\[(\d+)\]$/.exec(part);
    const citation = marker && cited.get(marker[1]);
    return citation
      ? el("button", { type: "button", class: "link marker", "aria-label": `${t("citation")} ${marker[1]}: ${citation.title || ""}`, onclick: openCited(citation.memory_id) }, part)
      : part;
  });
}

async function ask() {
  const question = $("a-q").value.trim();
  if (!current) {
    current = { id: uuid(), title: question, started: new Date().toISOString(), turns: [] };
    threads.unshift(current);
  }
  const turn = { question, method: $("a-method").value, partial: "", result: null };
  current.turns.push(turn);
  $("a-q").value = "";
  renderThreads();
  renderThread();
  const body = {
    question, method: turn.method, k: Number($("a-k").value) || 3, max_tokens: Number($("a-max").value) || 200,
    conversation_id: current.id, stream: true,
  };
  const live = () => $("chat-log").querySelector(".msg.answer:last-child .answer-text");
  await stream("/v1/answer", body, (event, data) => {
    if (event === "token") {
      turn.partial += data;
      live().textContent = turn.partial;
    } else if (event === "done") {
      turn.result = JSON.parse(data);
    }
  });
  save();
  renderThread();
}

export function wireChat(onSubmit) {
  onSubmit("answer-form", ask);
  $("new-thread").addEventListener("click", newThread);
  views.loaders.answer = async () => { renderThreads(); renderThread(); };
}

export function forgetThreads() {
  threads = [];
  current = null;
}
