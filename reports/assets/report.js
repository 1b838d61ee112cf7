// Row filtering for the long tables (every series, every shape): type to keep matching rows.
// The page works without it; this only saves scrolling.
document.addEventListener("DOMContentLoaded", () => {
  for (const input of document.querySelectorAll("input.filter")) {
    const table = input.parentElement.querySelector("table.filterable");
    if (!table) continue;
    input.addEventListener("input", () => {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      for (const row of table.tBodies[0].rows) {
        const text = row.textContent.toLowerCase();
        row.hidden = !words.every((word) => text.includes(word));
      }
    });
  }
});
