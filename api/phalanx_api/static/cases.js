// The review queue: "select every open case on this page" and a count of the selection.
// The bulk form works without this script (tick the cases one by one).
(function () {
  "use strict";
  const form = document.getElementById("bulk-review");
  if (!form) {
    return;
  }
  const all = form.querySelector("[data-pick-all]");
  const said = form.querySelector("[data-picked]");
  const picks = () => Array.from(document.querySelectorAll("input[data-pick]"));

  function show() {
    const boxes = picks();
    const chosen = boxes.filter((box) => box.checked).length;
    if (said) {
      said.textContent = chosen === 0 ? "none selected" : chosen + " selected";
      said.dataset.picked = String(chosen);
    }
    if (all) {
      all.checked = boxes.length > 0 && chosen === boxes.length;
      all.indeterminate = chosen > 0 && chosen < boxes.length;
    }
  }

  if (all) {
    all.addEventListener("change", () => {
      picks().forEach((box) => {
        box.checked = all.checked;
      });
      show();
    });
  }
  picks().forEach((box) => box.addEventListener("change", show));
  show();
})();
