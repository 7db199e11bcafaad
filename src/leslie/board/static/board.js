// leslie board: follow changes to .leslie/ without reloading. The server sends an event named "change" on
// /events when a file changes; the page then fetches itself again and swaps its <main> for the new one.
// Nothing else runs here, and the Content-Security-Policy allows no other script.
"use strict";
(function () {
  // The address the board printed carries its token; the first response set it as a cookie, which the links,
  // the fetches and the event stream below send. So the token leaves the address bar (and the history).
  const query = new URLSearchParams(window.location.search);
  if (query.has("token")) {
    query.delete("token");
    const rest = query.toString();
    history.replaceState(null, "", window.location.pathname + (rest ? "?" + rest : "") + window.location.hash);
  }
  const live = () => document.getElementById("live");
  let busy = false;
  let again = false;

  async function refresh(generation) {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(window.location.pathname, { cache: "no-store", credentials: "same-origin" });
      const text = await response.text();
      // Parsed into a separate document: nothing in it runs, and the server already escaped and sanitized it.
      const fresh = new DOMParser().parseFromString(text, "text/html");
      const main = fresh.getElementById("main");
      if (main) {
        document.getElementById("main").replaceWith(document.adoptNode(main));
        document.title = fresh.title;
      }
      document.documentElement.dataset.generation = String(generation);
    } catch (error) {
      const badge = live();
      if (badge) { badge.textContent = "offline"; badge.className = "live off"; }
    } finally {
      busy = false;
      if (again) { again = false; refresh(generation); }
    }
  }

  const source = new EventSource("/events");
  source.addEventListener("hello", (event) => {
    document.documentElement.dataset.generation = event.data;
    const badge = live();
    if (badge) { badge.textContent = "live"; badge.className = "live on"; }
  });
  source.addEventListener("change", (event) => refresh(event.data));
  source.onerror = () => {
    const badge = live();
    if (badge) { badge.textContent = "reconnecting"; badge.className = "live off"; }
  };
})();
