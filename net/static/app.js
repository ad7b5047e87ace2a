// Troupe's chat page: keeps the conversation, sends it over the WebSocket
// protocol of /v1/stream ({"type": "generate", "id", "messages", ...}),
// appends token frames to the reply as they arrive, shows tokens/s, and
// cancels a reply with the Stop button ({"type": "cancel", "id"}). For a
// model that reads images (the hello frame's "images"), PNG or JPEG files
// attached to a message go as OpenAI image_url parts (data: URLs).
"use strict";

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $("messages"), prompt: $("prompt"), send: $("send"), stop: $("stop"),
  stats: $("stats"), model: $("model"), status: $("status"), auth: $("auth"),
  apiKey: $("api-key"), system: $("system"), maxTokens: $("max-tokens"),
  temperature: $("temperature"), attach: $("attach"), imageInput: $("image-input"), attached: $("attached"),
};

const history = [];      // {role, content} of finished turns (content: a string or OpenAI parts)
const pending = [];      // data: URLs of images attached to the next message
let ws = null;
let current = null;      // the reply being streamed
let nextId = 1;
let retryMs = 500;

function setStatus(kind, title) {
  ui.status.className = "status " + kind;
  ui.status.title = title;
}

function addBubble(kind, text, images = []) {
  const div = document.createElement("div");
  div.className = "msg " + kind;
  for (const url of images) {
    const img = document.createElement("img");
    img.src = url;
    img.alt = "attached image";
    div.appendChild(img);
  }
  if (text) div.appendChild(document.createTextNode(text));
  ui.messages.appendChild(div);
  ui.messages.scrollTop = ui.messages.scrollHeight;
  return div;
}

function socketUrl() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const key = localStorage.getItem("troupe.apiKey");
  return proto + "//" + location.host + "/v1/stream" + (key ? "?api_key=" + encodeURIComponent(key) : "");
}

// Waits for /ready (the model may still be loading), then connects.
async function waitReady() {
  for (;;) {
    try {
      const r = await fetch("/ready");
      const s = await r.json();
      if (s.auth_required && !localStorage.getItem("troupe.apiKey")) {
        ui.auth.hidden = false;
        ui.model.textContent = "an API key is required";
        return false;
      }
      if (r.ok) return true;
      ui.model.textContent = "loading the model… " + Math.round(100 * (s.progress || 0)) + "%";
      setStatus("busy", "loading");
    } catch (e) {
      ui.model.textContent = "server unreachable";
      setStatus("", "offline");
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function connect() {
  if (!(await waitReady())) return;
  ws = new WebSocket(socketUrl());
  ws.onopen = () => { retryMs = 500; setStatus("ok", "connected"); ui.send.disabled = false; };
  ws.onmessage = (ev) => onFrame(JSON.parse(ev.data));
  ws.onclose = (ev) => {
    setStatus("", "disconnected");
    ui.send.disabled = true;
    if (current) finishReply("disconnected" + (ev.reason ? ": " + ev.reason : ""));
    if (ev.code === 1008 || ev.code === 4001) { ui.auth.hidden = false; return; }
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 10000);
  };
}

function onFrame(f) {
  if (f.type === "hello") {
    ui.model.textContent = f.model;
    ui.attach.hidden = !f.images;
    return;
  }
  if (!current || f.id !== current.id) {
    if (f.type === "error" && !f.id) addBubble("error", f.error.message);
    return;
  }
  if (f.type === "token") {
    const now = performance.now();
    if (current.tokens === 0) current.firstAt = now;
    current.tokens += 1;
    // The reply's leading space (the model continuing "Assistant:") is not shown.
    current.text = current.text ? current.text + f.text : f.text.trimStart();
    current.body.textContent = current.text;
    current.div.dataset.tokens = String(current.tokens);
    const ttft = current.firstAt - current.sentAt;
    const rate = current.tokens > 1 ? (current.tokens - 1) / ((now - current.firstAt) / 1000) : 0;
    ui.stats.textContent = `${current.tokens} tokens · ${rate.toFixed(1)} tokens/s · first token after ${ttft.toFixed(0)} ms`;
    ui.messages.scrollTop = ui.messages.scrollHeight;
  } else if (f.type === "final") {
    current.text += f.text;
    current.body.textContent = current.text;
    const t = f.timing;
    ui.stats.textContent = `${f.usage.prompt_tokens} prompt tokens · ${f.usage.completion_tokens} tokens · ` +
      `${t.tokens_per_second.toFixed(1)} tokens/s · ` +
      `first token after ${t.first_token_ms.toFixed(0)} ms · ${f.finish_reason}`;
    finishReply(f.finish_reason);
  } else if (f.type === "error") {
    addBubble("error", f.error.message);
    finishReply("error");
  }
}

function finishReply(reason) {
  const c = current;
  current = null;
  c.div.classList.remove("streaming");
  c.div.dataset.done = reason;
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = reason;
  c.div.appendChild(meta);
  if (c.text && reason !== "error") history.push({ role: "assistant", content: c.text });
  ui.stop.disabled = true;
  ui.send.disabled = !(ws && ws.readyState === WebSocket.OPEN);
}

function showAttached() {
  ui.attached.textContent = "";
  for (const url of pending) {
    const img = document.createElement("img");
    img.src = url;
    img.alt = "attached image";
    ui.attached.appendChild(img);
  }
}

function send() {
  const text = ui.prompt.value.trim();
  if (!text || current || !ws || ws.readyState !== WebSocket.OPEN) return;
  ui.prompt.value = "";
  const images = pending.splice(0);
  showAttached();
  addBubble("user", text, images);
  const parts = images.map((url) => ({ type: "image_url", image_url: { url } }));
  history.push({ role: "user", content: images.length ? [...parts, { type: "text", text }] : text });
  const messages = [];
  if (ui.system.value.trim()) messages.push({ role: "system", content: ui.system.value.trim() });
  messages.push(...history);
  const div = addBubble("assistant streaming", "");
  const body = document.createElement("span");
  div.appendChild(body);
  current = { id: "chat-" + nextId++, div, body, text: "", tokens: 0, sentAt: performance.now(), firstAt: 0 };
  const req = { type: "generate", id: current.id, messages };
  const maxTokens = parseInt(ui.maxTokens.value, 10);
  if (maxTokens > 0) req.max_tokens = maxTokens;
  const temperature = parseFloat(ui.temperature.value);
  if (!Number.isNaN(temperature)) req.temperature = temperature;
  ws.send(JSON.stringify(req));
  ui.send.disabled = true;
  ui.stop.disabled = false;
}

ui.stop.addEventListener("click", () => {
  if (current && ws) ws.send(JSON.stringify({ type: "cancel", id: current.id }));
});
$("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
ui.prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("clear").addEventListener("click", () => {
  history.length = 0;
  pending.length = 0;
  showAttached();
  ui.messages.textContent = "";
});
ui.imageInput.addEventListener("change", () => {
  for (const file of ui.imageInput.files) {
    const reader = new FileReader();
    reader.onload = () => { pending.push(reader.result); showAttached(); };
    reader.readAsDataURL(file);
  }
  ui.imageInput.value = "";
});
$("auth-save").addEventListener("click", () => {
  localStorage.setItem("troupe.apiKey", ui.apiKey.value);
  ui.auth.hidden = true;
  connect();
});

connect();
