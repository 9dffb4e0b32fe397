// The SQL page without a reload: "Run" posts the same form and swaps in the answer the server
// rendered. "Download CSV" and pages without scripts post the form as it is.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("query");
  form.addEventListener("submit", async (event) => {
    if (event.submitter && event.submitter.value === "csv") return;
    event.preventDefault();
    const body = new URLSearchParams(new FormData(form));
    body.set("output", "table");
    const reply = await fetch(form.getAttribute("action"), { method: "POST", body, credentials: "same-origin" });
    const html = new DOMParser().parseFromString(await reply.text(), "text/html");
    const answer = html.getElementById("answer");
    if (answer) document.getElementById("answer").replaceWith(answer);
    else form.submit();
  });
});
