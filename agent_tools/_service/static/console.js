// The web console: a page over the session routes. Everything the server sends is shown as text
// (textContent, never markup); the key stays in this tab's sessionStorage.
"use strict";

const KEY_NAME = "agent-tools-key";
const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function key() {
  return sessionStorage.getItem(KEY_NAME);
}

function showError(text) {
  const box = $("error");
  box.textContent = text || "";
  box.hidden = !text;
}

class HttpError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${key()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (_) {
    data = { detail: text };
  }
  if (!res.ok) {
    const detail = data && data.detail !== undefined ? data.detail : res.statusText;
    throw new HttpError(res.status, typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return data;
}

function sessionPath(id) {
  return "/sessions/" + id.split("/").map(encodeURIComponent).join("/");
}

// ---- key ---------------------------------------------------------------------------------------------

function showKeyForm() {
  $("key-form").hidden = false;
  $("main").hidden = true;
  $("forget").hidden = true;
}

async function useKey() {
  $("key-form").hidden = true;
  $("main").hidden = false;
  $("forget").hidden = false;
  await listSessions();
}

// ---- list and start ----------------------------------------------------------------------------------

async function listSessions() {
  const agent = $("filter-agent").value.trim();
  const query = new URLSearchParams({ limit: "50" });
  if (agent) query.set("agent", agent);
  try {
    const page = await api("GET", `/sessions?${query}`);
    showError("");
    const list = $("sessions");
    list.replaceChildren();
    for (const s of page.sessions) {
      const item = el(
        "li",
        { "data-id": s.session_id, onclick: () => openSession(s.session_id) },
        el("span", { text: s.title || s.session_id }),
        el("span", { class: "meta", text: `${s.agent || "?"} · ${s.state || s.status} · ${s.session_id}` }),
      );
      if (current && current.id === s.session_id) item.classList.add("open");
      list.append(item);
    }
    if (!page.sessions.length) list.append(el("li", { class: "note", text: "no sessions" }));
  } catch (err) {
    handleError(err);
  }
}

async function startSession(event) {
  event.preventDefault();
  const body = { prompt: $("start-prompt").value, agent: $("start-agent").value.trim() || "assistant" };
  const model = $("start-model").value.trim();
  if (model) body.model = model;
  if ($("start-keep").checked) body.keep_alive = true;
  try {
    const started = await api("POST", "/sessions", body);
    $("start-prompt").value = "";
    await openSession(started.session_id);
    await listSessions();
  } catch (err) {
    handleError(err);
  }
}

function handleError(err) {
  if (err instanceof HttpError && err.status === 401) {
    sessionStorage.removeItem(KEY_NAME);
    showKeyForm();
  }
  showError(err.message || String(err));
}

// ---- one session -------------------------------------------------------------------------------------

let current = null;

class SessionView {
  constructor(id) {
    this.id = id;
    this.lastId = null;
    this.closed = false;
    this.controller = null;
    this.steps = new Map(); // session id -> {position, attempt, shown, node}
    this.finished = new Map(); // session id -> Set of finished step positions
    this.tools = new Map(); // session id + call id -> node
    this.todos = new Map(); // session id -> todos
    this.children = new Map(); // child id -> {parent, title, status}
    this.refreshing = new Set();
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }

  who(sid) {
    if (sid === this.id) return null;
    const child = this.children.get(sid);
    return el("span", { class: "who", text: `[${child ? child.title : sid.split("/").pop()}]` });
  }

  add(sid, cls, text) {
    const node = el("div", { class: `entry ${cls}` }, this.who(sid), el("span", { text }));
    const box = $("timeline");
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 20;
    box.append(node);
    if (atEnd) box.scrollTop = box.scrollHeight;
    return node.lastChild;
  }

  // -- the streamed text, reassembled as agent_tools._live_text.LiveText does.
  step(sid, data) {
    const position = Number.isInteger(data.position) ? data.position : -1;
    if (position < 0 || (this.finished.get(sid) || new Set()).has(position)) return null;
    let step = this.steps.get(sid);
    if (!step || step.position !== position) {
      step = { position, attempt: Number.isInteger(data.attempt) ? data.attempt : 1, shown: "", node: null };
      this.steps.set(sid, step);
    }
    return step;
  }

  show(sid, step) {
    if (!step.node) {
      step.node = this.add(sid, "reply live", "");
      step.node.parentNode.dataset.session = sid;
    }
    step.node.textContent = step.shown;
  }

  restart(sid, step, attempt) {
    step.attempt = attempt;
    step.shown = "";
    if (step.node) {
      step.node.parentNode.remove();
      step.node = null;
    }
  }

  delta(sid, data) {
    const step = this.step(sid, data);
    if (!step) return;
    const attempt = Number.isInteger(data.attempt) ? data.attempt : 1;
    if (attempt < step.attempt) return;
    if (attempt > step.attempt) this.restart(sid, step, attempt);
    const text = String(data.text || "");
    const offset = Number.isInteger(data.offset) ? data.offset : step.shown.length;
    if (offset > step.shown.length) return; // a gap: the final message fills it
    const fresh = text.slice(step.shown.length - offset);
    if (fresh) {
      step.shown += fresh;
      this.show(sid, step);
    }
  }

  message(sid, data) {
    const content = String(data.content || "");
    const step = this.steps.get(sid);
    this.steps.delete(sid);
    if (Number.isInteger(data.position)) {
      if (!this.finished.has(sid)) this.finished.set(sid, new Set());
      this.finished.get(sid).add(data.position);
    }
    if (step && step.node && (data.position === undefined || data.position === step.position)) {
      step.node.textContent = content;
      step.node.parentNode.classList.remove("live");
    } else {
      if (step && step.node) step.node.parentNode.remove();
      if (content) this.add(sid, "reply", content).parentNode.dataset.session = sid;
    }
  }

  // -- the other items.
  handle(item) {
    const sid = item.session_id;
    const d = item.data || {};
    switch (item.kind) {
      case "text_delta":
        return this.delta(sid, d);
      case "text_discard": {
        const step = this.step(sid, d);
        if (step && Number.isInteger(d.attempt) && d.attempt > step.attempt) this.restart(sid, step, d.attempt);
        return;
      }
      case "assistant_message":
        return this.message(sid, d);
      case "turn_started":
        return void this.add(sid, "note", `turn ${d.turn}${d.trigger && d.trigger !== "user" ? ` (${d.trigger})` : ""}`);
      case "tool_started": {
        const args = typeof d.arguments === "string" ? d.arguments : JSON.stringify(d.arguments ?? "");
        const node = this.add(sid, "tool running", `${d.tool}(${args})`);
        this.tools.set(`${sid} ${d.call_id}`, node.parentNode);
        return;
      }
      case "tool_finished": {
        const row = this.tools.get(`${sid} ${d.call_id}`) || this.add(sid, "tool", String(d.tool)).parentNode;
        row.classList.remove("running");
        row.classList.add(d.is_error ? "error" : "ok");
        if (d.preview) row.append(el("div", { class: "note", text: String(d.preview) }));
        return;
      }
      case "todos":
        this.todos.set(sid, Array.isArray(d.todos) ? d.todos : []);
        return this.drawTodos();
      case "subagent_started":
        this.children.set(String(d.id), { parent: sid, title: String(d.title || d.role || d.id), status: "running" });
        this.add(sid, "note", `sub-agent ${d.title || d.id} started: ${d.task || ""}`);
        return this.drawTree();
      case "subagent_done": {
        const child = this.children.get(String(d.id));
        if (child) child.status = String(d.status || (d.ok ? "completed" : "failed"));
        this.add(sid, "note", `sub-agent ${child ? child.title : d.id} ${child ? child.status : ""}`);
        return this.drawTree();
      }
      case "question":
      case "answer":
      case "approval":
        if (item.kind === "answer") this.add(sid, "note", d.rejected ? `answer refused: ${d.reason}` : "answered");
        return this.refresh(sid);
      case "status":
        if (sid === this.id) $("status").textContent = String(d.status);
        return this.refresh(sid);
      case "budget":
        return void this.add(sid, "note", `budget reached: ${d.reason}`);
      case "input_rejected":
        return void this.add(sid, "note", `refused: ${d.reason}`);
      case "turn_finished":
        return this.refresh(sid);
      default:
        return;
    }
  }

  drawTodos() {
    const list = $("todos");
    list.replaceChildren();
    for (const [sid, todos] of this.todos) {
      for (const t of todos) {
        const mark = { completed: "[x]", in_progress: "[~]" }[t.status] || "[ ]";
        list.append(el("li", { class: String(t.status) }, this.who(sid), `${mark} ${t.content}`));
      }
    }
  }

  drawTree() {
    const branch = (parent) => {
      const list = el("ul");
      for (const [id, child] of this.children) {
        if (child.parent !== parent) continue;
        list.append(el("li", { "data-id": id }, `${child.title} · ${child.status}`, branch(id)));
      }
      return list.childNodes.length ? list : null;
    };
    const root = branch(this.id);
    $("tree").replaceChildren(...(root ? root.childNodes : []));
  }

  // -- status, questions and approvals, read from GET /sessions/{id}.
  async refresh(sid) {
    if (this.refreshing.has(sid)) return;
    this.refreshing.add(sid);
    try {
      const view = await api("GET", sessionPath(sid));
      if (this.closed) return;
      if (sid === this.id) {
        $("status").textContent = view.status.status;
        $("session-title").textContent = view.status.title || sid;
      }
      this.drawPending(sid, view);
    } catch (err) {
      if (!this.closed) showError(`${sid}: ${err.message}`);
    } finally {
      this.refreshing.delete(sid);
    }
  }

  drawPending(sid, view) {
    const box = $("pending");
    for (const old of [...box.children]) if (old.dataset.session === sid) old.remove();
    // The view holds its sub-agents' items too; each is drawn (and answered) under its own session.
    const own = (item) => (item.session_id ?? sid) === sid;
    for (const q of view.pending_questions.filter(own)) box.append(this.askForm(sid, q));
    for (const a of view.pending_approvals.filter(own)) box.append(this.approvalBox(sid, a));
  }

  askForm(sid, q) {
    const name = `q-${Math.random().toString(36).slice(2)}`;
    const type = q.multiSelect ? "checkbox" : "radio";
    const options = q.options.map((o) =>
      el("label", { title: o.description }, el("input", { type, name, value: o.label }), ` ${o.label} `),
    );
    const other = el("input", { placeholder: "Other (free text)", class: "other" });
    const form = el(
      "form",
      { class: "ask", "data-session": sid },
      this.who(sid),
      el("b", { text: q.header ? `${q.header}: ` : "" }),
      el("span", { class: "question", text: q.question }),
      el("fieldset", {}, ...options),
      other,
      el("button", { type: "submit", text: "Answer" }),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const selected = [...form.querySelectorAll("input:checked")].map((i) => i.value);
      const answer = { question: q.question, selected };
      if (other.value.trim()) answer.other = other.value;
      try {
        await api("POST", `${sessionPath(sid)}/answers`, { answers: [answer] });
        form.remove();
        showError("");
      } catch (err) {
        showError(err.message);
      }
    });
    return form;
  }

  approvalBox(sid, a) {
    const decide = async (approve) => {
      try {
        await api("POST", `${sessionPath(sid)}/approvals/${encodeURIComponent(a.approval_id)}`, {
          approve,
          digest: a.digest,
        });
        box.remove();
        showError("");
      } catch (err) {
        showError(err.message);
      }
    };
    const box = el(
      "div",
      { class: "approval", "data-session": sid },
      this.who(sid),
      el("b", { text: `${a.tool} waits for approval` }),
      el("pre", { text: a.arguments_preview }),
      el("button", { type: "button", class: "approve", text: "Approve", onclick: () => decide(true) }),
      el("button", { type: "button", class: "deny", text: "Deny", onclick: () => decide(false) }),
    );
    return box;
  }

  // -- the event stream: fetch (EventSource cannot send the key), resumed with Last-Event-ID.
  async follow() {
    this.wait = 500;
    while (!this.closed) {
      try {
        const ended = await this.readOnce();
        if (ended) {
          $("stream").textContent = "ended";
          await this.refresh(this.id);
          return;
        }
      } catch (err) {
        if (this.closed) return;
        if (err instanceof HttpError && err.status !== 503) {
          $("stream").textContent = "refused";
          return handleError(err);
        }
      }
      if (this.closed) return;
      $("stream").textContent = "reconnecting";
      await new Promise((resolve) => setTimeout(resolve, this.wait));
      this.wait = Math.min(this.wait * 2, 5000);
    }
  }

  async readOnce() {
    this.controller = new AbortController();
    const headers = { Authorization: `Bearer ${key()}`, Accept: "text/event-stream" };
    if (this.lastId) headers["Last-Event-ID"] = this.lastId;
    const res = await fetch(`${sessionPath(this.id)}/events`, { headers, signal: this.controller.signal });
    if (!res.ok) {
      let detail = res.statusText;
      try {
        detail = (await res.json()).detail;
      } catch (_) {}
      throw new HttpError(res.status, typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    $("stream").textContent = "live";
    this.wait = 500; // a connection that was taken starts the backoff over
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = parseEvent(block);
        if (!event) continue;
        if (event.event === "end") return true;
        if (event.event === "error") return false; // the server's reader stopped: resume from lastId
        if (event.id) this.lastId = event.id;
        try {
          this.handle(JSON.parse(event.data));
        } catch (err) {
          console.error("event not shown", err);
        }
      }
    }
  }
}

function parseEvent(block) {
  const fields = { event: "message", data: [] };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const name = at < 0 ? line : line.slice(0, at);
    let value = at < 0 ? "" : line.slice(at + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") fields.data.push(value);
    else if (name === "id") fields.id = value;
    else if (name === "event") fields.event = value;
  }
  return fields.data.length ? { ...fields, data: fields.data.join("\n") } : null;
}

async function openSession(id) {
  if (current) current.close();
  current = new SessionView(id);
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  for (const item of $("sessions").children) item.classList.toggle("open", item.dataset.id === id);
  $("session-pane").hidden = false;
  $("session-pane").dataset.session = id;
  $("session-title").textContent = id;
  $("status").textContent = "";
  $("stream").textContent = "connecting";
  $("timeline").replaceChildren();
  $("pending").replaceChildren();
  $("todos").replaceChildren();
  $("tree").replaceChildren();
  const view = current;
  view.refresh(id);
  view.follow();
}

async function sendMessage(event) {
  event.preventDefault();
  if (!current) return;
  try {
    await api("POST", `${sessionPath(current.id)}/messages`, { content: $("message").value });
    $("message").value = "";
    showError("");
  } catch (err) {
    handleError(err);
  }
}

async function stopSession() {
  if (!current) return;
  try {
    await api("POST", `${sessionPath(current.id)}/stop`, { reason: "stopped from the web console" });
  } catch (err) {
    handleError(err);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_NAME, $("key").value.trim());
    $("key").value = "";
    useKey();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_NAME);
    if (current) current.close();
    current = null;
    showKeyForm();
  });
  $("filter-form").addEventListener("submit", (event) => {
    event.preventDefault();
    listSessions();
  });
  $("start-form").addEventListener("submit", startSession);
  $("message-form").addEventListener("submit", sendMessage);
  $("stop").addEventListener("click", stopSession);
  // The address's #<session id> names the open session: on load, and when it is changed by hand.
  const fromHash = () => {
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (wanted && key() && (!current || current.id !== wanted)) openSession(wanted);
  };
  window.addEventListener("hashchange", fromHash);
  if (!key()) return showKeyForm();
  useKey().then(fromHash);
});
