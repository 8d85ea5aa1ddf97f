// Operations (the tenant's counts, readiness; for the server admin, health per component) and
// the admin view (tenants, tokens).
import { $, api, busy, el, facts, fill, session, t, table, views, when } from "./core.js";

views.loaders.operations = async () => {
  const ready = await fetch("/ready", { cache: "no-store" }).then((r) => r.json());
  const cards = [el("div", { class: "card", id: "ops-ready" }, el("h2", {}, t("ready")), facts({ status: ready.status, ...ready.checks, graph_mirror: ready.graph_mirror }))];
  if (session.role === "tenant") {
    const stats = await api("/v1/stats");
    cards.unshift(el("div", { class: "card", id: "ops-stats" }, el("h2", {}, t("stats")), facts(stats)));
  } else {
    const health = await api("/health/detail");
    cards.push(el("div", { class: "card", id: "ops-health" }, el("h2", {}, t("health")), facts(health)));
  }
  fill($("ops-out"), ...cards);
};

views.loaders.admin = async () => {
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
    el("button", { type: "button", id: "use-token", onclick: () => busy(() => views.signIn(issued.token, false)) }, t("use_token")),
    revoke,
  );
}

export function wireAdmin(onSubmit) {
  $("ops-refresh").addEventListener("click", () => busy(views.loaders.operations));
  onSubmit("tenant-form", async () => {
    const body = { name: $("t-name").value.trim() };
    if ($("t-lang").value.trim()) body.language = $("t-lang").value.trim();
    await api("/v1/admin/tenants", { method: "POST", body });
    $("t-name").value = "";
    await views.loaders.admin();
  });
  onSubmit("revoke-form", async () => {
    await api(`/v1/admin/tokens/${encodeURIComponent($("revoke-id").value.trim())}`, { method: "DELETE" });
    $("status").textContent = t("revoked");
  });
}
