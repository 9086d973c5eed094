/* The watch's status page, updated in place: every data-refresh seconds (on <html>) it
   fetches the page again and swaps in its facts, banners and tables, so the reader keeps
   the place, the focus and the folded list's state (no forced reload). The Pause button
   stops the updates until pressed again; without scripts the page is the same, with its
   Reload link. Served as /status.js: the page's Content-Security-Policy runs no inline
   script. */
(function () {
  "use strict";
  var root = document.documentElement;
  var every = Number(root.getAttribute("data-refresh")) * 1000;
  var button = document.getElementById("pause");
  var said = document.getElementById("updates");
  if (!(every > 0) || !button || !said || !window.fetch || !window.DOMParser) {
    return;
  }
  var paused = false;
  var timer = null;
  var updates = 0;

  function tell(text) {
    if (said.textContent !== text) {
      said.textContent = text;
    }
  }

  function schedule() {
    window.clearTimeout(timer);
    timer = paused ? null : window.setTimeout(update, every);
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var facts = fresh.getElementById("facts");
    var main = fresh.querySelector("main");
    if (!facts || !main) {
      throw new Error("not the status page");
    }
    var folded = document.getElementById("fine-list");
    var focused = document.activeElement && document.activeElement.id;
    var scrolls = Array.prototype.map.call(document.querySelectorAll("main .scroll"),
                                           function (box) { return box.scrollLeft; });
    document.title = fresh.title;
    document.getElementById("facts").replaceWith(facts);
    document.querySelector("main").replaceWith(main);
    var list = document.getElementById("fine-list");
    if (list && folded) {
      list.open = folded.open;
    }
    Array.prototype.forEach.call(document.querySelectorAll("main .scroll"), function (box, i) {
      box.scrollLeft = scrolls[i] || 0;
    });
    if (focused && document.getElementById(focused)) {
      document.getElementById(focused).focus({preventScroll: true});
    }
    updates += 1;
    root.setAttribute("data-updates", String(updates));
  }

  function update() {
    timer = null;
    if (paused) {
      return;
    }
    fetch(window.location.href, {cache: "no-store", headers: {Accept: "text/html"}})
      .then(function (response) {
        if (!response.ok) {
          throw new Error("the watch answered " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        if (!paused) {
          swap(html);
          tell("Updates every " + every / 1000 + " s");
        }
      })
      .catch(function (error) {
        tell("Could not update (" + error.message + "); trying again");
      })
      .then(schedule);
  }

  button.addEventListener("click", function () {
    paused = !paused;
    button.textContent = paused ? "Resume updates" : "Pause updates";
    if (paused) {
      window.clearTimeout(timer);
      timer = null;
      tell("Paused: no updates until resumed");
    } else {
      tell("Updates every " + every / 1000 + " s");
      update();
    }
  });
  button.hidden = false;
  tell("Updates every " + every / 1000 + " s");
  schedule();
}());
