// Clank's browser client (SPEC §11), served after morphdom's UMD bundle as
// /__clank/client.<hash>.js (cmake/ClankClient.cmake drops whole-line // comments and
// indentation; the served file must stay under 32 KiB). For each
// <div data-clank-root data-clank-session=ID>: a WebSocket to /__clank/sessions/ID/live,
// events delegated from the root, patches by morphdom; and window.clank.createAgentSurface,
// SPEC §9 over the real DOM. No eval, no inline handlers (CSP script-src 'self').
(() => {
const doc = document, morphdom = window.morphdom;
const set = words => {
  const o = Object.create(null);
  for (const w of words.split(" ")) o[w] = 1;
  return o;
};
const KEPT = set("a button input select textarea summary");
const CONTROLS = set("input select textarea");
const NOT_TYPABLE = set("file hidden submit button reset image");
const NOT_DATA = set("submit button reset image file");
const TAG_ROLES = { __proto__: null, button: "button", summary: "button", textarea: "textbox" };
const INPUT_ROLES = { __proto__: null, checkbox: "checkbox", radio: "radio", range: "slider",
  button: "button", submit: "button", reset: "button" };
// Lua's %s: ASCII whitespace only (JavaScript's \s also matches U+00A0 and others).
const SPACES = /[ \t\n\v\f\r]+/;

// ---------------------------------------------------------------------------------------
// The agent surface: lua/clank/ui/surface.lua and dom.lua, rule for rule. Where the server
// reads a prop the browser reads its attribute (agentId → data-clank-id, ...); live state
// (value, checked, selected options) comes from the DOM properties.

const attr = (el, name) => el.getAttribute(name);
const has = (el, name) => el.hasAttribute(name);
const tagOf = el => el.localName;
const ariaTrue = (el, name) => attr(el, name) === "true";
const inputType = el => tagOf(el) === "input" ? (attr(el, "type") ?? "text").toLowerCase() : null;
const toggle = ty => ty === "checkbox" || ty === "radio";
const skipped = el => attr(el, "data-clank-hidden") === "true" || has(el, "hidden") ||
  ariaTrue(el, "aria-hidden") || inputType(el) === "hidden";
const inert = el => has(el, "disabled") || ariaTrue(el, "aria-disabled");
const readOnly = el => has(el, "readonly") || ariaTrue(el, "aria-readonly");
const secret = el => /^(password|file)$/.test(inputType(el)) ||
  attr(el, "data-clank-secret") === "true";

// Text content; when visible, skipped subtrees and textareas are left out.
const text = (el, visible) => {
  let s = "";
  for (const n of el.childNodes) {
    if (n.nodeType === 3) s += n.data;
    else if (n.nodeType === 1 && !(visible && (skipped(n) || tagOf(n) === "textarea"))) {
      s += text(n, visible);
    }
  }
  return s;
};

// Whitespace collapsed, then cut to 160 characters (code points, as utf8.offset counts);
// null when nothing is left.
const collapse = s => (s ?? "").split(SPACES).join(" ").replace(/^ | $/g, "") || null;
const cut = s => Array.from(s).slice(0, 160).join("");

// The root's first descendant whose attribute has this value.
const byAttr = (root, name, value, tag = "") =>
  root.querySelector(tag + "[" + name + '="' + CSS.escape(value) + '"]');
// The element an agent means by id: agentId first, then id.
const find = (root, id) => typeof id === "string" &&
  (byAttr(root, "data-clank-id", id) || byAttr(root, "id", id)) || null;

const implicitRole = el => {
  const tag = tagOf(el);
  if (tag === "input") return INPUT_ROLES[inputType(el)] || "textbox";
  if (tag === "select") return has(el, "multiple") ? "listbox" : "combobox";
  if (tag === "a") return has(el, "href") ? "link" : null;
  return TAG_ROLES[tag] || null;
};
const roleOf = el => attr(el, "role") ?? implicitRole(el);

const kept = el => has(el, "data-clank-id") || has(el, "id") || roleOf(el) != null ||
  KEPT[tagOf(el)] || has(el, "data-clank-intent") || has(el, "data-clank-action");

// agentLabel, aria-label, aria-labelledby, <label for>, the enclosing label, placeholder,
// title, text content (not for controls).
const labelOf = (el, root) => {
  const refs = attr(el, "aria-labelledby"), id = attr(el, "id");
  let t, label = collapse(attr(el, "data-clank-label")) || collapse(attr(el, "aria-label"));
  if (!label && refs != null) {
    label = collapse(refs.split(SPACES)
      .map(ref => (t = ref && byAttr(root, "id", ref)) ? collapse(text(t, false)) : null)
      .filter(Boolean).join(" "));
  }
  if (!label && id != null && (t = byAttr(root, "for", id, "label"))) {
    label = collapse(text(t, true));
  }
  // the enclosing label (the root included)
  t = el.parentElement.closest("label");
  if (!label && t && root.contains(t)) label = collapse(text(t, true));
  label = label || collapse(attr(el, "placeholder")) || collapse(attr(el, "title"));
  if (!label && !CONTROLS[tagOf(el)]) label = collapse(text(el, true));
  return label && cut(label);
};

// An option's value as the server reads it: its value attribute, else its text.
const optionValue = o => attr(o, "value") ?? text(o, false);

// The value a control holds: a string, or a list for select multiple.
const valueOf = el => {
  if (tagOf(el) !== "select") return el.value;
  const opts = Array.from(el.options);
  const chosen = opts.filter(o => o.selected).map(optionValue);
  if (has(el, "multiple")) return chosen;
  return chosen.length ? chosen[0] : opts.length ? optionValue(opts[0]) : "";
};

// Attributes read into a node as they are: node key → attribute.
const PLAIN = [["description", "data-clank-description"], ["intent", "data-clank-intent"],
  ["action", "data-clank-action"], ["name", "name"], ["type", "type"],
  ["placeholder", "placeholder"]];

const nodeOf = (el, root) => {
  const tag = tagOf(el), ty = inputType(el), role = roleOf(el), node = {};
  const put = (key, v) => { if (v != null) node[key] = v; };
  put("id", attr(el, "data-clank-id") ?? attr(el, "id"));
  node.tag = tag;
  put("role", role);
  put("label", labelOf(el, root));
  for (const [key, name] of PLAIN) put(key, attr(el, name));
  if (tag === "a") put("href", attr(el, "href"));
  if (inert(el)) node.disabled = true;
  if (readOnly(el)) node.readonly = true;
  if (has(el, "required") || ariaTrue(el, "aria-required")) node.required = true;
  if (ariaTrue(el, "aria-invalid")) node.invalid = true;
  const expanded = attr(el, "aria-expanded");
  if (expanded === "true" || expanded === "false") node.expanded = expanded === "true";
  if (toggle(ty)) node.checked = el.checked;
  else if (role === "checkbox" || role === "radio") node.checked = ariaTrue(el, "aria-checked");
  if (tag === "select" && has(el, "multiple")) node.multiple = true;
  if (CONTROLS[tag] && !secret(el)) {
    const v = toggle(ty) ? attr(el, "value") : valueOf(el);
    if (Array.isArray(v) || v) node.value = v;
  }
  return node;
};

// Kept elements become nodes; any other element appears only as a wrapper of kept children,
// { tag, children }, and not at all without them.
const collect = (el, root, out) => {
  for (const c of el.children) {
    if (skipped(c)) continue;
    const kids = collect(c, root, []);
    const node = kept(c) ? nodeOf(c, root) : kids.length ? { tag: tagOf(c) } : null;
    if (!node) continue;
    if (kids.length) node.children = kids;
    out.push(node);
  }
  return out;
};

// The data the form would submit: name → string, a list for repeated names and select
// multiple; checked checkboxes and radios give their value ("on" without one).
const formData = form => {
  const values = Object.create(null);
  for (const c of form.querySelectorAll("input, select, textarea")) {
    const name = attr(c, "name"), ty = inputType(c);
    if (name == null || has(c, "disabled") || NOT_DATA[ty] || toggle(ty) && !c.checked) continue;
    const v = valueOf(c), cur = values[name];
    if (cur === undefined) values[name] = v;
    else if (Array.isArray(cur)) cur.push(...[].concat(v));
    else values[name] = [cur].concat(v);
  }
  return values;
};

const fire = (el, type) => el.dispatchEvent(new Event(type, { bubbles: true }));

const createAgentSurface = root => {
  if (!(root instanceof Element)) {
    throw new TypeError("clank.createAgentSurface: expected an element");
  }
  return {
    inspect: () => collect(root, root, []),
    // A click as the DOM does it; the live channel sends the events it causes.
    activate: id => {
      const el = find(root, id);
      if (!el || inert(el)) return false;
      el.click();
      return true;
    },
    // Sets the control's live value, then dispatches input and change.
    input: (id, value) => {
      const el = find(root, id), ty = el && inputType(el);
      if (!el || !CONTROLS[tagOf(el)] || inert(el) || readOnly(el) || NOT_TYPABLE[ty]) {
        return false;
      }
      const select = tagOf(el) === "select", opts = select ? Array.from(el.options) : [];
      const values = opts.map(optionValue);
      const ok = v => typeof v === "string" && (!opts.length || values.includes(v));
      if (toggle(ty)) {
        if (typeof value !== "boolean") return false;
        el.checked = value;
      } else if (select && has(el, "multiple")) {
        if (!Array.isArray(value) || !value.every(ok)) return false;
        opts.forEach((o, i) => { o.selected = value.includes(values[i]); });
      } else {
        if (!ok(value)) return false;
        if (select) el.selectedIndex = values.indexOf(value);
        else el.value = value;
      }
      fire(el, "input");
      fire(el, "change");
      return true;
    }
  };
};

// ---------------------------------------------------------------------------------------
// What the runtime shows over the app: its notice's default look (zero specificity, so any rule
// of the app's wins) and, in development, an error over the page (SPEC §11, dev-error).

const SHEET = ":where(.clank-notice){margin:8px;padding:10px 14px;border:1px solid #f0b4ae;" +
  "border-radius:8px;background:#fff0ee;color:#8a1c12;font:15px/1.4 system-ui,sans-serif}" +
  ":where(.clank-notice button){margin-left:12px;font:inherit}" +
  "#clank-dev-error{position:fixed;inset:0;z-index:2147483647;overflow:auto;padding:0 12px;" +
  "background:#0f1115a0;font:14px/1.5 system-ui,sans-serif;color:#1f2328;text-align:left}" +
  "#clank-dev-error>div{max-width:60rem;margin:6vh auto;padding:20px 24px;background:#fff;" +
  "border-top:6px solid #cf222e;border-radius:8px;box-shadow:0 12px 40px #0008}" +
  "#clank-dev-error header{display:flex;justify-content:space-between;gap:1em}" +
  "#clank-dev-error h2{margin:0;font-size:18px;color:#cf222e}" +
  "#clank-dev-error button{font:inherit;font-size:20px;border:0;background:none;cursor:pointer}" +
  "#clank-dev-error pre{white-space:pre-wrap;margin:12px 0;padding:12px;background:#f6f8fa;" +
  "border-radius:6px;font:13px/1.5 ui-monospace,monospace}" +
  "#clank-dev-error p{margin:0;font:600 13px ui-monospace,monospace}" +
  "#clank-dev-error ol{margin:8px 0;padding-left:2em;font:13px/1.6 ui-monospace,monospace}" +
  "#clank-dev-error details{color:#59636e}#clank-dev-error summary{cursor:pointer}";
let styled = false, overlay = null;
const style = () => {
  if (styled) return;
  styled = true;
  // a constructed sheet: not an inline style, so no policy of the page's refuses it
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(SHEET);
    doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
  } catch (e) { /* unstyled */ }
};

const el = (tag, text, parent) => {
  const e = doc.createElement(tag);
  if (text != null) e.textContent = text;
  if (parent) parent.append(e);
  return e;
};

const devClear = () => {
  if (overlay) overlay.remove();
  overlay = null;
};

// {"t":"dev-error","kind","title","message","file"?,"line"?,"frames":[{file?,line?,name,app}]}:
// the app's frames, then the runtime's folded.
const devError = m => {
  style();
  devClear();
  overlay = el("div");
  overlay.id = "clank-dev-error";
  overlay.setAttribute("role", "alertdialog");
  overlay.setAttribute("aria-label", m.title);
  const box = el("div", null, overlay), head = el("header", null, box);
  el("h2", m.title, head);
  const close = el("button", "\u00d7", head);
  close.setAttribute("aria-label", "Close");
  close.addEventListener("click", devClear);
  el("pre", m.message, box);
  if (m.file) el("p", m.file + (m.line ? ":" + m.line : ""), box);
  const at = f => f.file ? f.file + (f.line ? ":" + f.line : "") + " in " + f.name : f.name;
  const list = (frames, parent) => {
    const ol = el("ol", null, parent);
    for (const f of frames) el("li", at(f), ol);
  };
  const frames = Array.isArray(m.frames) ? m.frames : [];
  const rest = frames.filter(f => !f.app);
  list(frames.filter(f => f.app), box);
  if (rest.length) {
    const more = el("details", null, box);
    el("summary", "Show runtime frames (" + rest.length + ")", more);
    list(rest, more);
  }
  doc.body.append(overlay);
};

// ---------------------------------------------------------------------------------------
// The live channel (SPEC §11)

const live = root => {
  const session = attr(root, "data-clank-session"), pending = new Set();
  let ws = null, ready = false, stopped = false, notice = null;
  let seq = 0, v = 0, delay = 250, frame = 0, focused, timer = 0;
  // held: the html of version v as last applied (a diff's base); resyncing: a full html was
  // asked for, and diffs are ignored until it comes.
  let held = null, resyncing = false;

  const status = s => root.setAttribute("data-clank-status", s);

  // A role=alert box just before the root (outside it: patches and inspect() never see it),
  // with a button when action is [label, fn]; a click dismisses it, unless it is fatal.
  const notify = (message, fatal, action) => {
    if (notice ? notice.fatal : message == null) return;
    if (!notice) {
      style();
      notice = el("div");
      notice.setAttribute("role", "alert");
      notice.className = "clank-notice";
      notice.addEventListener("click", () => notify());
      root.before(notice);
    }
    notice.fatal = fatal;
    notice.hidden = message == null;
    notice.textContent = message ?? "";
    if (action) {
      const b = el("button", action[0], notice);
      b.type = "button";
      b.addEventListener("click", action[1]);
    }
  };

  const stop = message => {
    stopped = true;
    if (ws) ws.close();
    status("closed");
    notify(message, true);
  };

  // An unknown session: a fresh page load mounts a fresh one (at most once per 10 s).
  const reload = () => {
    let last = 0;
    try {
      last = sessionStorage.getItem("clank.reload");
      sessionStorage.setItem("clank.reload", Date.now());
    } catch (e) { /* no storage */ }
    if (Date.now() - last < 1e4) return stop("The live session ended: reload the page.");
    stopped = true;
    location.reload();
  };

  // The focused control keeps its value, selection and checked state through a patch
  // (a select's selection is put back after morphdom's pass). focused: the element that had
  // focus when the patch began (moving a keyed row takes the focus away until it is put back).
  const keepFocused = (from, to) => {
    if (from === focused && CONTROLS[tagOf(from)] && tagOf(from) !== "select") {
      for (const name of ["value", "checked"]) {
        if (has(from, name)) to.setAttribute(name, attr(from, name));
        else to.removeAttribute(name);
      }
      const ty = inputType(from);
      if (toggle(ty)) to.checked = from.checked;
      else if (ty !== "file") to.value = from.value;
    }
    return true;
  };

  // Keyed elements (the prop key) are matched by their data-clank-key, whose last segment is
  // then "k:<key>" (a key's ":" and "." are written %XX) and which is unique in the root:
  // inserts, removals and reorders move their DOM nodes. Others are matched as morphdom does by
  // default (by id, else by position); the NUL keeps the two apart (the HTML parser never puts
  // one in an id).
  const nodeKey = n => {
    const k = n.getAttribute && attr(n, "data-clank-key");
    return /k:[^.]*$/.test(k) ? "\0" + k : n.getAttribute && attr(n, "id") || n.id;
  };

  // A keyed row that moves takes the focus away from the element in it: that element is focused
  // again, its caret where it was.
  const patch = html => {
    const to = root.cloneNode(false), a = focused = doc.activeElement, inside = a && root.contains(a);
    const chosen = inside && tagOf(a) === "select" && Array.from(a.options, o => o.selected);
    const { selectionStart: s, selectionEnd: e } = inside ? a : {};
    to.innerHTML = html;
    morphdom(root, to, { childrenOnly: true, getNodeKey: nodeKey, onBeforeElUpdated: keepFocused });
    if (a !== doc.activeElement && root.contains(a)) {
      a.focus({ preventScroll: true });
      if (s != null) a.setSelectionRange(s, e);
    }
    if (chosen) Array.from(a.options).forEach((o, i) => { o.selected = !!chosen[i]; });
  };

  // Re-fetches the page's same-origin stylesheets under a fresh query.
  const refreshCss = () => {
    for (const link of doc.querySelectorAll('link[rel~="stylesheet"][href]')) {
      const url = new URL(link.href);
      url.searchParams.set("clank", Date.now());
      if (url.origin === location.origin) link.href = url.href;
    }
  };

  // A diff's splices [at, del, ins] (UTF-16 units of the base, in order) applied to the html
  // held, or null when it is not the diff's base or a splice is out of order or range.
  const spliced = m => {
    if (held == null || m.base !== v || !Array.isArray(m.splices)) return null;
    let out = "", from = 0;
    for (const sp of m.splices) {
      const [at, del, ins] = Array.isArray(sp) ? sp : [];
      if (!Number.isInteger(at) || !Number.isInteger(del) || typeof ins !== "string" ||
        at < from || del < 0 || at + del > held.length) return null;
      out += held.slice(from, at) + ins;
      from = at + del;
    }
    return out + held.slice(from);
  };

  const receive = m => {
    if (m.t === "diff") {
      const html = resyncing ? null : spliced(m);
      if (html == null) {
        if (!resyncing && ws) ws.send('{"t":"resync"}');
        resyncing = true;
        return;
      }
      v = m.v;
      held = html;
      patch(html);
    } else if (m.t === "html") {
      v = m.v;
      held = m.html;
      resyncing = false;
      patch(m.html);
      // mounted: what was said of the connection, or of an error, is over
      if (!ready) {
        notify();
        devClear();
      }
      ready = true;
      delay = 250;
      status("open");
    } else if (m.t === "reload") {
      if (m.v) v = m.v;
      held = m.html;
      patch(m.html);
    } else if (m.t === "css") {
      refreshCss();
    } else if (m.t === "error") {
      notify(String(m.message));
    } else if (m.t === "confirm") {
      // a handler asks the person before an action runs (its input already found valid)
      const s = ws, ok = window.confirm(String(m.message));
      if (s && ws === s) s.send(JSON.stringify({ t: "confirm", id: m.id, ok }));
    } else if (m.t === "dev-error") {
      devError(m);
    } else if (m.t === "dev-clear") {
      devClear();
      notify();
    }
  };

  const connect = () => {
    const s = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") +
      location.host + "/__clank/sessions/" + encodeURIComponent(session) + "/live?diffs=1");
    let opened = false;
    ws = s;
    status("connecting");
    s.onopen = () => { opened = true; };
    s.onmessage = e => {
      let m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      if (ws === s) receive(m);
    };
    s.onclose = e => {
      if (ws !== s) return;
      ws = null;
      ready = false;
      if (stopped) return;
      if (e.code === 4404) return reload();
      if (e.code === 4401) { // signed out (here or in another tab): to the sign-in page, and back
        stopped = true;
        location.assign("/__clank/auth/login?next=" +
          encodeURIComponent(location.pathname + location.search));
        return;
      }
      if (e.code === 4409) return stop("This page is open in another tab.");
      // Forever while the page is open, every 250 ms doubling to 5 s, each wait between half
      // and all of that (pages that lost one server do not all come back at once); a handshake
      // that failed says so.
      status("connecting");
      if (!opened) notify("Cannot reach the server: retrying\u2026", false, ["Retry now", retry]);
      timer = setTimeout(connect, delay / 2 + Math.random() * delay / 2);
      delay = Math.min(delay * 2, 5000);
    };
  };
  const retry = () => {
    clearTimeout(timer);
    if (!ws && !stopped) connect();
  };
  addEventListener("online", retry);

  // Sends one event for el (the element naming the type in data-clank-on). Confirmation is not
  // asked here: the server asks ({"t":"confirm"}) once the action's input is known and valid.
  const send = (el, type, form) => {
    const key = attr(el, "data-clank-key"), ty = inputType(el);
    if (!ready || key == null || !root.contains(el)) return;
    const m = { t: "event", seq: ++seq, v, key, type };
    if (type === "submit") m.values = formData(form);
    else if (toggle(ty)) m.checked = el.checked;
    else if (CONTROLS[tagOf(el)]) m.value = valueOf(el);
    if (notice) notify();
    ws.send(JSON.stringify(m));
  };

  // input: at most one per element per animation frame, with the value it has then.
  const flush = () => {
    const els = Array.from(pending);
    cancelAnimationFrame(frame);
    frame = 0;
    pending.clear();
    for (const el of els) send(el, "input");
  };

  // The nearest element in the root whose data-clank-on names the event's type.
  const onEvent = e => {
    const type = e.type, on = e.target.closest('[data-clank-on~="' + type + '"]');
    const el = on !== root && root.contains(on) ? on : null;
    if (type === "submit") {
      // A form with an action and no handler navigates; every other submit stays here.
      if (el || !has(e.target, "action")) e.preventDefault();
      flush();
      if (el) send(el, type, e.target);
    } else if (el && type === "input") {
      pending.add(el);
      if (!frame) frame = requestAnimationFrame(flush);
    } else if (el) {
      if (type === "click" && tagOf(el) === "a") e.preventDefault();
      flush();
      send(el, type);
    }
  };

  for (const type of ["click", "input", "change", "submit"]) root.addEventListener(type, onEvent);
  connect();
};

window.clank = window.clank || {};
window.clank.createAgentSurface = createAgentSurface;
doc.querySelectorAll("[data-clank-root][data-clank-session]").forEach(live);
})();
