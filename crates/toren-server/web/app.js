// Toren's web page: the live parts. Everything here talks to the JSON API under /ui/api
// (the sign-in cookie stands for the bearer token; every POST carries the page's CSRF
// token). Values from runs are only ever put into the page as text (textContent), never
// as markup, and always through TorenDisplay (display.js: toren-display's rules, from the
// server), so a control, invisible or reordering character shows as its marker, as on the
// terminal: visibleLines for text that keeps its lines, one() for a single-line value.
"use strict";

const one = (value) => TorenDisplay.visible(value === undefined || value === null ? "" : String(value));

// Puts text into a node as the terminal would show it.
function say(node, text) {
  node.textContent = TorenDisplay.visibleLines(text === undefined || text === null ? "" : String(text));
}

// The words of pages.rs's hidden_warning and attempt_notice, which the approvals page
// shows (the browser suite checks that both pages say the same).
function hiddenWarning(what, text) {
  const n = TorenDisplay.hiddenCount(text);
  if (n === 0) return "";
  return "⚠ this " + what + " contains " + n + " hidden or control character" + (n === 1 ? "" : "s") +
    " (" + TorenDisplay.findings(text).join(" ") + "), shown as ⟨…⟩: read it with care";
}

function attemptNotice(attempt) {
  return attempt > 1
    ? "⚠ attempt " + attempt + ": this command was interrupted mid-execution and asks to run again; it may already have had some of its effects"
    : "";
}

const csrf = () => {
  const meta = document.querySelector('meta[name="csrf"]');
  return meta ? meta.content : "";
};

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  let doc = null;
  try { doc = await response.json(); } catch (_) { doc = null; }
  if (!response.ok) {
    throw new Error((doc && doc.detail) || response.statusText);
  }
  return doc;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) say(node, text);
  return node;
}

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const STATUS_AFTER = {
  run_created: "queued", approval_requested: "awaiting_approval",
  run_completed: "completed", run_failed: "failed", run_cancelled: "cancelled",
  approval_decided: "running", model_responded: "running", tool_started: "running",
  tool_completed: "running", sandbox_provisioned: "running", context_compacted: "running",
  message_delivered: "running", budget_reached: "awaiting_budget", budget_raised: "running",
  host_approval_requested: "awaiting_approval", egress_connections: null, rewound: "running",
};
const KINDS = Object.keys(STATUS_AFTER);

// How a sandbox came to be when not simply new: reconnected by a resuming worker (same
// disk), or replacing a lost one, with what was restored from the log.
function sandboxOrigin(event) {
  const o = event.origin;
  if (!o) return "";
  if (o.kind === "reconnected") return " — reconnected to " + one(event.instance) + " (same disk)";
  if (o.kind === "replaced") {
    const restored = (o.restored || []).map(one).join(", ") || "nothing";
    const lost = (o.not_restored || []).map((n) => one(n.path) + " (" + one(n.why) + ")").join(", ");
    return " — " + one(o.previous) + " was lost; new sandbox " + one(event.instance) +
      "; restored: " + restored + (lost ? "; not restored: " + lost : "");
  }
  return "";
}

function setStatus(node, status) {
  node.textContent = status.replace(/_/g, " ");
  node.className = "status status-" + status;
}

function pendingTitle(count) {
  const base = document.title.replace(/^\(\d+\) /, "");
  document.title = count > 0 ? "(" + count + ") " + base : base;
}

// ---- the run page ---------------------------------------------------------------------

function runPage() {
  const timeline = document.getElementById("timeline");
  const run = timeline.dataset.run;
  const statusNode = document.getElementById("run-status");
  const streaming = document.getElementById("streaming");
  const streamState = document.getElementById("stream-state");
  const approval = document.getElementById("approval");
  const cancel = document.getElementById("cancel");
  const budget = document.getElementById("budget");
  const seen = new Set();
  const calls = {}; // call id -> {node, started}
  const usage = { input: 0, output: 0 };
  let waitingCall = null;
  // The open approval requests of the run's current wait (id -> what the panel shows:
  // {text, what, attempt}), as
  // toren_protocol::Waiting folds them: a decision shows the run running only once none is
  // open, and the panel then shows the one still waiting.
  const open = new Map();
  let status = null;

  // The panel: the exact text asked about (made visible), a warning when it holds hidden
  // characters, and the notice when an interrupted call asks again.
  function showApproval(id, asked) {
    waitingCall = id;
    say(document.getElementById("approval-command"), asked.text);
    const notes = [
      ["approval-warning", hiddenWarning(asked.what, asked.text)],
      ["approval-attempt", attemptNotice(asked.attempt)],
    ];
    for (const [nodeId, note] of notes) {
      const node = document.getElementById(nodeId);
      node.textContent = note;
      node.hidden = note === "";
    }
    document.getElementById("approval-error").textContent = "";
    approval.hidden = false;
  }

  function foldStatus(event) {
    const after = STATUS_AFTER[event.type];
    if (event.type === "approval_decided") {
      if (status === "awaiting_approval" && open.size === 0) status = "running";
    } else if (after) {
      if (event.type !== "approval_requested" && event.type !== "host_approval_requested") open.clear();
      status = after;
    }
    if (status) setStatus(statusNode, status);
  }

  function callNode(id, name, args) {
    if (calls[id]) return calls[id];
    const li = el("li", "event tool");
    li.dataset.call = id;
    const head = el("div", "tool-head");
    head.append(el("span", "tool-name", one(name)));
    const command = args && typeof args === "object" && typeof args.command === "string"
      ? args.command : JSON.stringify(args);
    const cmd = el("pre", "command", command);
    const meta = el("div", "tool-meta muted", "requested");
    li.append(head, cmd, meta);
    timeline.append(li);
    calls[id] = { node: li, meta: meta, started: null };
    return calls[id];
  }

  function render(event) {
    const at = Date.parse(event.at);
    const seqNode = (li) => { li.dataset.seq = String(event.seq); return li; };
    switch (event.type) {
      case "run_created": {
        say(document.getElementById("run-input"), event.input);
        const dl = document.getElementById("policy-list");
        const p = event.policy;
        const rows = p ? [
          ["backend", one(p.backend)], ["image", p.image ? one(p.image) : "—"], ["network", p.network ? "on" : "off"],
          ["approval", one(p.approval)], ["env", (p.env || []).map(one).join(", ") || "—"],
        ] : [["sandbox", "none"]];
        rows.forEach(([k, v]) => { dl.append(el("dt", "", k), el("dd", "", v)); });
        timeline.append(seqNode(el("li", "event muted", "run created")));
        break;
      }
      case "model_responded": {
        streaming.hidden = true;
        streaming.textContent = "";
        const li = seqNode(el("li", "event assistant"));
        if (event.message.text) li.append(el("pre", "text", event.message.text));
        const u = event.usage || {};
        usage.input += u.input_tokens || 0;
        usage.output += u.output_tokens || 0;
        document.getElementById("usage").textContent =
          usage.input + " input tokens · " + usage.output + " output tokens";
        li.append(el("div", "muted", (event.model ? one(event.model) : "model") + " · " + (u.input_tokens || 0) + " in / " + (u.output_tokens || 0) + " out"));
        timeline.append(li);
        (event.message.tool_calls || []).forEach((c) => callNode(c.id, c.name, c.arguments));
        break;
      }
      case "approval_requested": {
        const c = callNode(event.call_id, event.tool, { command: event.command });
        c.meta.textContent = "waiting for approval" + (event.attempt > 1 ? " (attempt " + event.attempt + ")" : "");
        seqNode(c.node);
        open.clear();
        const asked = { text: event.command, what: "command", attempt: event.attempt || 1 };
        open.set(event.call_id, asked);
        showApproval(event.call_id, asked);
        break;
      }
      case "host_approval_requested": {
        // A held connection waits for a person: network access to a host outside the list.
        const what = "network access to " + event.host + ":" + event.port +
          (event.call_id ? " (from bash call " + event.call_id + (event.command ? ": " + event.command : "") + ")" : "");
        timeline.append(seqNode(el("li", "event muted", "asks for " + what)));
        const asked = { text: what, what: "request", attempt: 1 };
        open.set(event.id, asked);
        showApproval(event.id, asked);
        break;
      }
      case "egress_connections":
        (event.connections || []).forEach((c) => {
          const bytes = c.reason ? ": " + one(c.reason) : " (↑" + (c.bytes_up || 0) + " B ↓" + (c.bytes_down || 0) + " B)";
          timeline.append(seqNode(el("li", "event muted", one(c.method) + " " + one(c.host) + ":" + c.port + " " + one(c.outcome) + bytes)));
        });
        break;
      case "approval_decided": {
        const c = calls[event.call_id];
        const text = (event.approved ? "approved" : "denied") + " by " + one(event.by) + " via " + one(event.via) +
          (event.reason ? ": " + one(event.reason) : "");
        if (c) say(c.meta, text);
        timeline.append(seqNode(el("li", "event muted decision", text)));
        open.delete(event.call_id);
        if (waitingCall === event.call_id) {
          const rest = Array.from(open.entries());
          if (rest.length > 0) showApproval(rest[rest.length - 1][0], rest[rest.length - 1][1]);
          else { approval.hidden = true; waitingCall = null; }
        }
        break;
      }
      case "tool_started": {
        const c = callNode(event.call_id, event.tool, null);
        c.started = at;
        c.meta.textContent = "running" + (event.attempt > 1 ? " (attempt " + event.attempt + ")" : "");
        c.node.classList.add("running");
        timeline.append(seqNode(el("li", "event muted", "started " + one(event.tool))));
        break;
      }
      case "tool_completed": {
        const c = callNode(event.call_id, "tool", null);
        c.node.classList.remove("running");
        const parts = [];
        if (event.exit_code !== undefined && event.exit_code !== null) parts.push("exit " + event.exit_code);
        else if (event.is_error) parts.push("error");
        if (c.started !== null) parts.push(((at - c.started) / 1000).toFixed(2) + " s");
        c.meta.textContent = parts.join(" · ");
        const lines = event.output === "" ? 0 : event.output.split("\n").length;
        const details = el("details", "output");
        details.append(el("summary", "", lines + (lines === 1 ? " line" : " lines") + (event.truncated ? " (truncated)" : "")));
        details.append(el("pre", "", event.output));
        c.node.append(details);
        if (event.is_error) c.node.classList.add("failed");
        timeline.append(seqNode(el("li", "event muted", "finished " + (parts[0] || ""))));
        break;
      }
      case "run_completed":
        timeline.append(seqNode(el("li", "event final completed", event.output)));
        break;
      case "run_failed":
        timeline.append(seqNode(el("li", "event final failed", event.error)));
        break;
      case "run_cancelled":
        // The reason says who, when a person cancelled ("cancelled by ada via api").
        timeline.append(seqNode(el("li", "event final cancelled", event.reason ||
          "cancelled" + (event.by ? " by " + one(event.by) + (event.via ? " via " + one(event.via) : "") : ""))));
        break;
      case "sandbox_provisioned":
        timeline.append(seqNode(el("li", "event muted", "sandbox: " + one(event.backend) + sandboxOrigin(event))));
        break;
      case "message_delivered":
        timeline.append(seqNode(el("li", "event muted", "sent " + one(event.path) + " (" + event.bytes + " bytes) to " + one(event.channel))));
        break;
      case "context_compacted":
        timeline.append(seqNode(el("li", "event muted", "context compacted")));
        break;
      case "budget_reached": {
        const s = event.spent || {};
        const what = (event.reached || []).join(" and ");
        document.getElementById("spending").textContent = (s.tokens || 0) + " tokens" +
          (s.usd !== undefined && s.usd !== null ? " · $" + Number(s.usd).toFixed(4) : "") +
          " · " + (s.wall_secs || 0) + " s active";
        document.getElementById("budget-reached").textContent =
          "Reached: " + what + ". Raise it to let the run go on from where it stopped.";
        document.getElementById("budget-error").textContent = "";
        budget.hidden = false;
        timeline.append(seqNode(el("li", "event muted budget", "budget reached: " + what)));
        break;
      }
      case "budget_raised": {
        const added = [];
        if (event.tokens) added.push(event.tokens + " tokens");
        if (event.usd) added.push("$" + event.usd);
        if (event.wall_secs) added.push(event.wall_secs + " s");
        budget.hidden = true;
        timeline.append(seqNode(el("li", "event muted budget", "budget raised by " + one(event.by) +
          " via " + one(event.via) + ": +" + added.join(", +"))));
        break;
      }
      case "rewound":
        timeline.append(seqNode(el("li", "event muted rewound", "rewound to step " + event.to +
          (event.checkpoint ? " (workspace restored)" : " (workspace unchanged)") +
          (event.by ? " by " + event.by : "") + "; what follows continues from there")));
        break;
      default:
        timeline.append(seqNode(el("li", "event muted", one(event.type))));
    }
    foldStatus(event);
    if (TERMINAL.has(STATUS_AFTER[event.type])) {
      cancel.hidden = true;
      approval.hidden = true;
      if (budget) budget.hidden = true;
    }
  }

  const source = new EventSource(timeline.dataset.events);
  const onEvent = (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch (_) { return; }
    if (seen.has(event.seq)) return; // shown once, whatever a reconnect repeats
    seen.add(event.seq);
    render(event);
    if (TERMINAL.has(STATUS_AFTER[event.type])) {
      source.close();
      streamState.textContent = "";
    }
  };
  KINDS.forEach((kind) => source.addEventListener(kind, onEvent));
  source.addEventListener("text", (message) => {
    try {
      const chunk = JSON.parse(message.data).text;
      streaming.hidden = false;
      // Marked character by character, so a sequence split across chunks is caught.
      streaming.textContent += TorenDisplay.visibleLines(chunk);
    } catch (_) { /* a malformed chunk is dropped */ }
  });
  source.addEventListener("open", () => { streamState.textContent = "live"; streamState.dataset.state = "live"; });
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) {
      streamState.textContent = "reconnecting…";
      streamState.dataset.state = "reconnecting";
    }
  });

  const decide = async (decision) => {
    if (!waitingCall) return;
    const reason = document.getElementById("approval-reason").value.trim();
    const body = { decision: decision };
    if (reason) body.reason = reason;
    try {
      await post("/ui/api/runs/" + encodeURIComponent(run) + "/approvals/" + encodeURIComponent(waitingCall), body);
      approval.hidden = true;
    } catch (e) {
      say(document.getElementById("approval-error"), e.message);
    }
  };
  document.getElementById("approve").addEventListener("click", () => decide("approve"));
  document.getElementById("deny").addEventListener("click", () => decide("deny"));
  const raise = document.getElementById("raise-budget");
  if (raise) raise.addEventListener("click", async () => {
    const body = {};
    const value = (id) => { const n = document.getElementById(id); return n ? n.value.trim() : ""; };
    if (value("add-tokens")) body.add_tokens = Number(value("add-tokens"));
    if (value("add-usd")) body.add_usd = Number(value("add-usd").replace(/^\$/, ""));
    if (value("add-wall")) body.add_wall = value("add-wall");
    try {
      await post("/ui/api/runs/" + encodeURIComponent(run) + "/budget", body);
      budget.hidden = true;
    } catch (e) {
      say(document.getElementById("budget-error"), e.message);
    }
  });
  cancel.addEventListener("click", async () => {
    if (!window.confirm("Cancel this run?")) return;
    try { await post("/ui/api/runs/" + encodeURIComponent(run) + "/cancel", {}); }
    catch (e) { say(streamState, e.message); }
  });
}

// ---- the runs list --------------------------------------------------------------------

function runsPage() {
  const source = new EventSource("/ui/live/runs");
  source.addEventListener("runs", (message) => {
    let doc;
    try { doc = JSON.parse(message.data); } catch (_) { return; }
    document.getElementById("pending-count").textContent = String(doc.pending);
    pendingTitle(doc.pending);
    const tbody = document.querySelector("#runs tbody");
    const rowOf = (id) => document.querySelector('tr[data-run="' + CSS.escape(id) + '"]');
    // Newest first: the runs before the first one shown are new since the page loaded
    // (added only on the unfiltered first page).
    const fresh = [];
    if (!window.location.search && tbody) {
      for (const run of doc.runs) {
        if (rowOf(run.id)) break;
        fresh.push(run);
      }
    }
    fresh.reverse().forEach((run) => {
      const row = document.createElement("tr");
      row.dataset.run = run.id;
      const link = el("a", "", run.id);
      link.href = "/ui/runs/" + encodeURIComponent(run.id);
      const first = el("td");
      first.append(link);
      const status = el("span", "status", "");
      status.dataset.status = "";
      const statusCell = el("td");
      statusCell.append(status);
      const updated = el("td", "", run.updated);
      updated.dataset.updated = "";
      row.append(first, el("td", "", run.agent), statusCell, el("td", "", run.updated), updated);
      tbody.prepend(row);
      const none = document.getElementById("no-runs");
      if (none) none.remove();
    });
    doc.runs.forEach((run) => {
      const row = rowOf(run.id);
      if (!row) return;
      setStatus(row.querySelector("[data-status]"), run.status);
      say(row.querySelector("[data-updated]"), run.updated);
    });
  });
}

// ---- approvals ------------------------------------------------------------------------

function approvalsPage() {
  document.querySelectorAll("li.approval").forEach((item) => {
    item.querySelectorAll("button.decide").forEach((button) => {
      button.addEventListener("click", async () => {
        const reason = item.querySelector("input.reason").value.trim();
        const body = { decision: button.dataset.decision };
        if (reason) body.reason = reason;
        const result = item.querySelector(".result");
        try {
          await post("/ui/api/runs/" + encodeURIComponent(item.dataset.run) + "/approvals/" + encodeURIComponent(item.dataset.call), body);
          result.textContent = button.dataset.decision === "approve" ? "approved" : "denied";
          item.querySelectorAll("button").forEach((b) => { b.disabled = true; });
          item.classList.add("decided");
        } catch (e) {
          say(result, e.message);
        }
      });
    });
  });
}

// ---- a session ------------------------------------------------------------------------

function sessionPage() {
  const form = document.getElementById("send");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = document.getElementById("message").value;
    const result = document.getElementById("send-result");
    try {
      const doc = await post("/ui/api/sessions/" + encodeURIComponent(form.dataset.session) + "/messages", { text: text });
      const run = doc && (doc.run_id || (doc.run && doc.run.id) || doc.id);
      if (run) window.location.href = "/ui/runs/" + encodeURIComponent(run);
      else { result.textContent = "queued: it runs when the current turn ends"; }
    } catch (err) {
      say(result, err.message);
    }
  });
  // Rewind: the workspace and the conversation back to before a turn, as one unit.
  for (const button of document.querySelectorAll("button.rewind-turn")) {
    button.addEventListener("click", async () => {
      const step = button.dataset.step;
      const said = document.getElementById("rewind-result");
      if (!window.confirm("Rewind the session to before turn " + step + "? Its workspace and conversation go back to how they were then.")) return;
      try {
        const doc = await post("/ui/api/sessions/" + encodeURIComponent(form.dataset.session) + "/rewind", { to: step });
        said.textContent = "rewound to before turn " + doc.step + (doc.checkpoint ? " (workspace restored)" : " (workspace unchanged)");
        window.location.reload();
      } catch (err) {
        say(said, err.message);
      }
    });
  }
}

// Rewind a run (its page): the workspace and the conversation back to the chosen step.
function runRewind() {
  const button = document.getElementById("rewind-run");
  if (!button) return;
  const run = document.getElementById("timeline").dataset.run;
  button.addEventListener("click", async () => {
    const step = document.getElementById("rewind-step").value;
    const said = document.getElementById("rewind-result");
    const ended = button.dataset.ended === "true";
    const ask = ended
      ? "Start a new run from step " + step + "? It begins with the workspace and the conversation as they were then; this run stays as it is."
      : "Rewind the run to step " + step + "? Its workspace and conversation go back to how they were then.";
    if (!window.confirm(ask)) return;
    try {
      const doc = await post("/ui/api/runs/" + encodeURIComponent(run) + "/rewind", { to: Number(step) });
      if (doc.forked_from) {
        // The run had ended: a new run goes on from the step; its page follows it.
        window.location.href = "/ui/runs/" + encodeURIComponent(doc.run_id);
        return;
      }
      said.textContent = "rewound to step " + doc.to + (doc.checkpoint ? " (workspace restored)" : " (workspace unchanged)");
      window.location.reload();
    } catch (err) {
      said.textContent = err.message;
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "run") { runPage(); runRewind(); }
  else if (page === "runs") runsPage();
  else if (page === "approvals") approvalsPage();
  else if (page === "session") sessionPage();
});
