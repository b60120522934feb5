// lakelog console: refresh the page's content in place, filter table rows, confirm actions. No library.
(function () {
  "use strict";
  const body = document.body;
  const every = parseInt(body.dataset.refreshMs || "5000", 10);
  const filter = document.getElementById("filter");

  function applyFilter() {
    const text = (filter && filter.value || "").toLowerCase();
    document.querySelectorAll("table.filterable tbody tr").forEach(function (row) {
      row.hidden = text !== "" && row.textContent.toLowerCase().indexOf(text) < 0;
    });
  }

  function wire() {
    document.querySelectorAll("form.action").forEach(function (form) {
      if (form.dataset.wired) return;
      form.dataset.wired = "1";
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm || "Do this?")) event.preventDefault();
      });
    });
    applyFilter();
  }

  function busy() {
    // Never swap the content under a person typing in it.
    const active = document.activeElement;
    return active && active.closest && active.closest("#content") && /INPUT|SELECT|TEXTAREA/.test(active.tagName);
  }

  async function refresh() {
    if (document.hidden || busy()) return;
    try {
      const answer = await fetch(window.location.href, { headers: { "X-Console-Fragment": "1" } });
      if (!answer.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await answer.text();
      const fresh = holder.querySelector("#content");
      const content = document.getElementById("content");
      if (fresh && content) {
        content.innerHTML = fresh.innerHTML;
        body.dataset.refreshed = String(Date.now());
        wire();
      }
    } catch (error) {
      body.dataset.refreshError = String(error);
    }
  }

  if (filter) {
    filter.addEventListener("input", function () {
      const url = new URL(window.location.href);
      if (filter.value) url.searchParams.set("q", filter.value); else url.searchParams.delete("q");
      window.history.replaceState(null, "", url);
      applyFilter();
    });
  }
  wire();
  if (every > 0) window.setInterval(refresh, every);
})();
