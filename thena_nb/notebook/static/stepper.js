// The Stepper's front end: draws the parts Python sends and sends back commands.
//
// Python (thena_nb/notebook/stepper.py) holds the session, the gates and every view; this
// module lays the parts out, fills the HTML sections Python made (model text in them is
// escaped there), and turns clicks, keys, the slider, text boxes, tabs and gate cards into
// `model.send({part, do, value})` commands. Nothing is loaded from the network.

const ROWS = [
  ["html", "header"],
  ["row", "view_bar", "thena-stepper-view-bar", ["view_html", "fork_button"]],
  ["row", "controls", "thena-stepper-controls",
    ["step_button", "iteration_button", "run_button", "pause_button", "continue_button",
     "stop_button", "gate_box"]],
  ["gates"],
  ["row", null, "thena-stepper-forked", ["fork_html", "parent_button"]],
  ["row", null, "thena-scrub", ["back_button", "slider", "forward_button"]],
  ["html", "position_html"],
  ["html", "error_html"],
  ["col", "live_box", "thena-live", ["live_label", "live_text"]],
  ["main"],
  ["row", "breaks", "thena-breaks", ["break_label", "break_error_box", "break_rescued_box",
    "break_text"]],
  ["html", "break_error_html"],
  ["html", "frame_html"],
  ["html", "chart"],
  ["row", null, "thena-what-if-row", ["what_if_text", "what_if_button"]],
  ["html", "what_if_html"],
];
const PANES = ["turn_html", "saw_html", "reasoning_html", "tools_html", "edit"];
const KEYS = { ArrowLeft: "back_button", ArrowRight: "forward_button", s: "step_button",
  i: "iteration_button", r: "run_button", p: "pause_button", c: "continue_button" };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text) node.textContent = text;
  return node;
}

function render({ model, el: host }) {
  const send = (part, fields) => model.send({ part, ...fields });
  const root = el("div", "thena-ui thena-stepper");
  root.tabIndex = 0;
  const nodes = {};      // part name -> its element
  const draws = [];      // functions that redraw from the model
  const listeners = [];  // [event, fn] given to model.on, taken off when the view goes
  const on = (event, fn) => { model.on(event, fn); listeners.push([event, fn]); };

  const fixed = (name) => (model.get("parts_fixed") || {})[name] || {};

  function section(name) {
    const node = el("div", "thena-section thena-part-" + name);
    nodes[name] = node;
    const trait = "s_" + name;
    let shown = null;
    const draw = () => {
      const html = model.get(trait) || "";
      if (html !== shown) { node.innerHTML = html; shown = html; }
    };
    on("change:" + trait, draw);
    draws.push(draw);
    return node;
  }

  function button(name) {
    const node = el("button", "thena-button");
    node.type = "button";
    node.addEventListener("click", () => send(name, { do: "click" }));
    nodes[name] = node;
    return node;
  }

  function check(name) {
    const label = el("label", "thena-check");
    const box = el("input");
    box.type = "checkbox";
    box.addEventListener("change", () => send(name, { value: box.checked }));
    label.append(box, el("span"));
    nodes[name] = label;
    return label;
  }

  function text(name) {
    const wrap = el("div", "thena-text thena-part-" + name);
    nodes[name] = wrap;
    const state = fixed(name);
    const box = state.rows > 1 ? el("textarea") : el("input");
    if (state.rows > 1) box.rows = state.rows; else box.type = "text";
    let timer = null;
    const push = () => send(name, { value: box.value });
    if (state.submit) {
      box.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") { ev.preventDefault(); push(); }
      });
      box.addEventListener("change", push);
    } else {
      box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(push, 150); });
      box.addEventListener("change", () => { clearTimeout(timer); push(); });
    }
    if (!state.rows || state.rows <= 1) {
      // an Enter in a one-line box must not reach the notebook (it would run the cell)
      box.addEventListener("keydown", (ev) => ev.stopPropagation());
    }
    const trait = "s_" + name;
    const draw = () => {
      const value = model.get(trait);
      if (value !== undefined && document.activeElement !== box && box.value !== value) {
        box.value = value;
      }
    };
    on("change:" + trait, draw);
    draws.push(draw);
    wrap.appendChild(box);
    return wrap;
  }

  function choice(name) {
    const label = el("label", "thena-choice");
    const select = el("select");
    select.addEventListener("change", () => send(name, { value: JSON.parse(select.value) }));
    label.append(el("span"), select);
    nodes[name] = label;
    return label;
  }

  function slider(name) {
    const label = el("label", "thena-slider");
    const range = el("input", "thena-range");
    range.type = "range";
    range.min = "0";
    const readout = el("span", "thena-readout");
    let timer = null;
    range.addEventListener("keydown", (ev) => ev.stopPropagation()); // arrows move it only
    range.addEventListener("input", () => {
      readout.textContent = range.value;
      clearTimeout(timer);
      timer = setTimeout(() => send(name, { value: Number(range.value) }), 60);
    });
    label.append(el("span", "thena-slider-label"), range, readout);
    nodes[name] = label;
    return label;
  }

  function part(name) {
    const kind = fixed(name).kind;
    if (kind === "button") return button(name);
    if (kind === "check") return check(name);
    if (kind === "text") return text(name);
    if (kind === "choice") return choice(name);
    if (kind === "slider") return slider(name);
    if (name === "break_label") return el("b", "thena-break-label", "break");
    return section(name);
  }

  function row(kind, group, cls, names) {
    const box = el("div", (kind === "row" ? "thena-row " : "thena-col ") + cls);
    if (group) nodes[group] = box;
    for (const name of names) box.appendChild(part(name));
    return box;
  }

  function main() {
    const box = el("div", "thena-row thena-main");
    const transcript = section("transcript_html");
    transcript.classList.add("thena-transcript-pane");
    const inspector = el("div", "thena-inspector thena-tabs");
    const bar = el("div", "thena-tab-bar");
    bar.setAttribute("role", "tablist");
    const panes = PANES.map((name) => {
      if (name !== "edit") return section(name);
      const edit = el("div", "thena-edit");
      edit.append(
        section("edit_help"),
        row("row", null, "thena-edit-row", ["edit_target", "edit_button"]),
        text("edit_text"), section("edit_note"), section("edit_error"),
      );
      return edit;
    });
    nodes.inspector = { bar, panes };
    inspector.append(bar, ...panes.map((pane) => {
      pane.classList.add("thena-pane");
      return pane;
    }));
    box.append(transcript, inspector);
    return box;
  }

  // One card per held call, kept by call id: a redraw updates what Python changed and
  // leaves what is being typed alone.
  function gateCard(card) {
    const box = el("div", "thena-gate");
    box.dataset.call = card.id;
    const head = el("div", "thena-gate-head");
    const editor = el("textarea");
    editor.rows = 4;
    const boxes = { editor };
    for (const [name, placeholder] of [["reason", "reason for rejecting"],
      ["result", "result instead of running the tool"]]) {
      const input = el("input");
      input.type = "text";
      input.placeholder = placeholder;
      input.addEventListener("keydown", (ev) => ev.stopPropagation());
      boxes[name] = input;
    }
    const buttons = [];
    const decide = (action, tip) => {
      const b = el("button", "thena-button", action);
      b.type = "button";
      b.title = tip;
      b.addEventListener("click", () => model.send({
        gate: card.id, do: action.toLowerCase(), editor: editor.value,
        reason: boxes.reason.value, result: boxes.result.value,
      }));
      buttons.push(b);
      return b;
    };
    const rows = [
      [decide("Approve", "Run the call as the model made it"),
       decide("Edit", "Run the call with the arguments in the editor")],
      [boxes.reason, decide("Reject", "Do not run it; the model is told the reason")],
      [boxes.result, decide("Respond", "Do not run it; the model gets the result typed here")],
    ];
    const error = el("div", "thena-gate-error");
    box.append(head, editor);
    for (const items of rows) {
      const line = el("div", "thena-row");
      line.append(...items);
      box.appendChild(line);
    }
    box.appendChild(error);
    const drawn = {};
    const update = (next) => {
      if (drawn.head !== next.head) head.innerHTML = next.head;
      if (drawn.error !== next.error) error.innerHTML = next.error;
      for (const name of ["editor", "reason", "result"]) {
        // Python's text replaces the box's only when Python changed it.
        if (drawn[name] !== next[name]) boxes[name].value = next[name];
      }
      for (const b of buttons) b.disabled = next.decided;
      Object.assign(drawn, next);
    };
    update(card);
    return { box, update };
  }

  const gates = el("div", "thena-gates");
  const cardsShown = new Map();
  const drawGates = () => {
    const cards = model.get("gates") || [];
    const ids = new Set(cards.map((card) => card.id));
    for (const [id, shown] of cardsShown) {
      if (!ids.has(id)) { shown.box.remove(); cardsShown.delete(id); }
    }
    for (const card of cards) {
      const shown = cardsShown.get(card.id);
      if (shown) shown.update(card);
      else {
        const made = gateCard(card);
        cardsShown.set(card.id, made);
        gates.appendChild(made.box);
      }
    }
  };
  on("change:gates", drawGates);
  draws.push(drawGates);

  for (const [kind, name, cls, names] of ROWS) {
    if (kind === "html") root.appendChild(section(name));
    else if (kind === "gates") { nodes.gates = gates; root.appendChild(gates); }
    else if (kind === "main") root.appendChild(main());
    else root.appendChild(row(kind, name, cls, names));
  }

  function drawPart(name, state) {
    const node = nodes[name];
    if (!node) return;
    if (name === "inspector") {
      const { bar, panes } = node;
      if (bar.childElementCount !== state.titles.length) {
        bar.replaceChildren(...state.titles.map((title, index) => {
          const tab = el("button", "thena-tab", title);
          tab.type = "button";
          tab.setAttribute("role", "tab");
          tab.addEventListener("click", () => send("inspector", { value: index }));
          return tab;
        }));
      }
      [...bar.children].forEach((tab, index) => {
        const on = index === state.selected_index;
        tab.classList.toggle("thena-tab-on", on);
        tab.setAttribute("aria-selected", String(on));
      });
      panes.forEach((pane, index) => { pane.hidden = index !== state.selected_index; });
      return;
    }
    node.hidden = Boolean(state.hidden);
    if (state.kind === "button") {
      node.textContent = state.description || "";
      node.title = state.tooltip || "";
      node.disabled = Boolean(state.disabled);
      node.dataset.icon = state.icon || "";
      node.className = "thena-button" + (state.button_style ? " thena-" + state.button_style : "");
    } else if (state.kind === "check") {
      const box = node.querySelector("input");
      box.checked = Boolean(state.value);
      node.querySelector("span").textContent = state.description;
    } else if (state.kind === "text") {
      const box = node.firstChild;
      box.placeholder = state.placeholder || "";
      box.disabled = Boolean(state.disabled);
    } else if (state.kind === "choice") {
      const select = node.querySelector("select");
      node.querySelector("span").textContent = state.description || "";
      const options = state.options.map(([label, value]) => [label, JSON.stringify(value)]);
      const now = [...select.options].map((o) => [o.textContent, o.value]);
      if (JSON.stringify(now) !== JSON.stringify(options)) {
        select.replaceChildren(...options.map(([label, value]) => {
          const option = el("option", "", label);
          option.value = value;
          return option;
        }));
      }
      select.value = JSON.stringify(state.value);
    } else if (state.kind === "slider") {
      const range = node.querySelector("input");
      node.querySelector(".thena-slider-label").textContent = state.description || "";
      range.max = String(state.max);
      range.disabled = Boolean(state.disabled);
      if (document.activeElement !== range) range.value = String(state.value);
      node.querySelector(".thena-readout").textContent = String(state.value);
    }
  }

  const partsShown = {};
  const drawParts = () => {
    const parts = model.get("parts") || {};
    for (const [name, changing] of Object.entries(parts)) {
      const state = { ...fixed(name), ...changing };
      const key = JSON.stringify(state);
      if (partsShown[name] !== key) { drawPart(name, state); partsShown[name] = key; }
    }
  };
  on("change:parts", drawParts);
  on("change:parts_fixed", drawParts);
  draws.push(drawParts);

  root.addEventListener("keydown", (ev) => {
    const tag = ev.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const name = KEYS[ev.key];
    if (!name) return;
    ev.preventDefault();
    ev.stopPropagation(); // the notebook's own shortcuts stay out of the Stepper
    const button = nodes[name];
    if (button && !button.disabled && !button.hidden) send(name, { do: "click" });
  });

  for (const draw of draws) draw();
  host.appendChild(root);
  return () => {
    for (const [event, fn] of listeners) model.off(event, fn);
  };
}

export default { render };
