// Live overview: redraw the tiles and the runs table every few seconds while the tab is
// visible (the server renders them), and keep the navigation's badge in step. Without
// this script the page is the same, as of its loading.
"use strict";

(function () {
  const root = document.getElementById("overview-live");
  if (!root || !root.dataset.panelsUrl) {
    return;
  }
  const seconds = Math.max(2, Number(root.dataset.pollSeconds) || 5);

  function showOpenCases() {
    const tile = root.querySelector("[data-tile=cases] [data-open-cases]");
    const badge = document.querySelector(".bar [data-open-cases]");
    if (tile && badge) {
      const count = Number(tile.dataset.openCases);
      badge.textContent = String(count);
      badge.dataset.openCases = String(count);
      badge.hidden = count === 0;
    }
  }

  async function poll() {
    if (!document.hidden) {
      try {
        const response = await fetch(root.dataset.panelsUrl, {
          credentials: "same-origin",
          cache: "no-store",
          headers: { Accept: "text/html" },
        });
        if (response.redirected || response.status === 401) {
          return; // the session ended: stop; a reload shows the login form
        }
        if (response.ok) {
          const html = await response.text();
          if (html !== root.dataset.drawn) {
            root.innerHTML = html;
            root.dataset.drawn = html;
            root.dataset.redraws = String(Number(root.dataset.redraws || 0) + 1);
            showOpenCases();
          }
        }
      } catch (error) {
        // A dropped connection or a restarting server: try again at the next tick.
      }
    }
    window.setTimeout(poll, seconds * 1000);
  }

  window.setTimeout(poll, seconds * 1000);
})();
