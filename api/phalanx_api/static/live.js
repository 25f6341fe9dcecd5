// Live run page: while the run is not over, poll its small progress endpoint and, when a
// round finishes or the status changes, swap in the freshly rendered panels (the server
// draws every chart). No framework, no external file: served by the app.
"use strict";

(function () {
  const root = document.getElementById("run-live");
  if (!root || root.dataset.terminal === "true") {
    return;
  }
  const seconds = Math.max(1, Number(root.dataset.pollSeconds) || 3);
  let stopped = false;

  function stop(message) {
    stopped = true;
    const live = root.querySelector("[data-live]");
    if (live && message) {
      live.textContent = message;
      live.classList.remove("live");
    }
  }

  function showOpenCases(count) {
    const badge = document.querySelector(".bar [data-open-cases]");
    if (badge && Number.isInteger(count)) {
      badge.textContent = String(count);
      badge.dataset.openCases = String(count);
      badge.hidden = count === 0;
    }
  }

  async function redraw() {
    const response = await fetch(root.dataset.panelsUrl, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "text/html" },
    });
    if (response.redirected || !response.ok) {
      throw new Error("panels: HTTP " + response.status);
    }
    root.innerHTML = await response.text();
  }

  async function poll() {
    if (stopped) {
      return;
    }
    if (!document.hidden) {
      try {
        const response = await fetch(root.dataset.progressUrl, {
          credentials: "same-origin",
          cache: "no-store",
          headers: { Accept: "application/json" },
        });
        if (response.status === 401) {
          stop("session expired: reload the page to log in again");
          return;
        }
        if (response.ok) {
          const progress = await response.json();
          showOpenCases(progress.open_cases);
          const round = String(progress.current_round);
          if (round !== root.dataset.round || progress.status !== root.dataset.status) {
            await redraw();
            root.dataset.round = round;
            root.dataset.status = progress.status;
          }
          if (progress.terminal) {
            root.dataset.terminal = "true";
            stop("");
            return;
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
