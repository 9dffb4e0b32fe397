// The review pages by keyboard: j / k next and previous item, p / f / n label pass / fail /
// not applicable, c the comment (Esc leaves it, Ctrl+Enter labels pass from it), d the
// "Add to dataset" form's name (Enter adds the run), u the queue.
// Each key presses one of the page's own forms, which work without this script too.
document.addEventListener("DOMContentLoaded", () => {
  const byId = (id) => document.getElementById(id);
  const submit = (formId, buttonId) => {
    const form = byId(formId);
    if (!form) return false;
    const button = buttonId ? byId(buttonId) : null;
    form.requestSubmit(button || undefined);
    return true;
  };
  const keys = {
    j: () => submit("next") || submit("start"),
    k: () => submit("previous"),
    p: () => submit("label", "label-pass"),
    f: () => submit("label", "label-fail"),
    n: () => submit("label", "label-na"),
    c: () => { const c = byId("comment"); if (c) c.focus(); return Boolean(c); },
    d: () => {
      const name = document.querySelector("#add-dataset input[name=name]");
      if (name) name.focus();
      return Boolean(name);
    },
    u: () => { const back = byId("back"); if (back) back.click(); return Boolean(back); },
  };
  let sent = false;  // one key, one request: no second label while the first is on its way
  window.addEventListener("pageshow", () => { sent = false; });  // back to a cached page
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("textarea, input, select");
    if (typing) {
      if (event.key === "Escape") typing.blur();
      if (event.key === "Enter" && event.ctrlKey && typing.id === "comment") {
        event.preventDefault();
        if (!sent) sent = submit("label", "label-pass");
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || sent) return;
    const act = keys[event.key];
    if (act && act()) {
      event.preventDefault();
      sent = event.key !== "c" && event.key !== "d";
    }
  });
});
