// loopd dashboard: swaps in the HTML fragments the server streams (SSE),
// ticks elapsed times, tails the log, and sends the buttons' requests to
// the JSON API with the page's CSRF token. No framework, no build step.
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var body = document.body;
  var live = document.getElementById("live");

  function setLive(on) { if (live) live.className = "live-dot " + (on ? "on" : "off"); }

  // Elapsed times of running runs tick in the browser between updates.
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-elapsed-ms]").forEach(function (el) {
      if (!el.dataset.t0) el.dataset.t0 = String(now);
      var ms = Number(el.dataset.elapsedMs) + (now - Number(el.dataset.t0));
      el.textContent = human(ms);
    });
  }
  function human(ms) {
    var s = Math.round(ms / 1000);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(s % 60).padStart(2, "0") + "s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h" + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d" + String(h % 24).padStart(2, "0") + "h";
  }
  setInterval(tick, 1000);

  // When the daemon shuts down, each stream's last event is "bye": every
  // stream is closed for good and the page says so. Left to reconnect, an
  // EventSource would keep knocking on the port with the session cookie,
  // and whoever listens there after the daemon (another user) would get it.
  var sources = [], stopped = false;
  function daemonStopped(msg) {
    if (stopped) return;
    stopped = true;
    sources.forEach(function (es) { es.close(); });
    setLive(false);
    body.dataset.stopped = "1";
    var note = document.createElement("p");
    note.id = "daemon-stopped";
    note.setAttribute("role", "alert");
    note.textContent = msg;
    body.prepend(note);
  }

  function stream(url, handlers) {
    if (!url || !window.EventSource || stopped) return null;
    var es = new EventSource(url);
    sources = sources.filter(function (o) { return o.readyState !== EventSource.CLOSED; });
    sources.push(es);
    es.addEventListener("bye", function (ev) { daemonStopped(JSON.parse(ev.data).message); });
    es.onopen = function () { setLive(true); };
    es.onerror = function () { setLive(false); if (handlers.error) handlers.error(es); };
    Object.keys(handlers).forEach(function (k) {
      if (k === "error") return;
      es.addEventListener(k, function (ev) { handlers[k](JSON.parse(ev.data), Number(ev.lastEventId) || 0); });
    });
    return es;
  }

  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }

  // Runs page: one row per changed run; a backlog's update is its group,
  // its row and its task runs' rows under it.
  if (body.dataset.page === "runs") {
    var tbody = document.getElementById("runs");
    // A backlog's group is folded as the user left it (kept for the
    // browser tab), else as the server renders it: open while it runs.
    var folds = {};
    try { folds = JSON.parse(sessionStorage.getItem("loopd-folds") || "{}"); } catch (e) { folds = {}; }
    function kids(id) { return tbody.querySelectorAll('tr[data-parent="' + CSS.escape(id) + '"]'); }
    function applyFold(row) {
      var id = row.id.slice(4), open = id in folds ? folds[id] : row.dataset.open === "1";
      kids(id).forEach(function (k) { k.hidden = !open; });
      var b = row.querySelector("button[data-fold]");
      if (b) b.setAttribute("aria-expanded", open ? "true" : "false");
    }
    tbody.querySelectorAll("tr.backlog").forEach(applyFold);
    tbody.addEventListener("click", function (ev) {
      var b = ev.target.closest && ev.target.closest("button[data-fold]");
      if (!b) return;
      folds[b.dataset.fold] = b.getAttribute("aria-expanded") !== "true";
      try { sessionStorage.setItem("loopd-folds", JSON.stringify(folds)); } catch (e) { /* private mode */ }
      applyFold(document.getElementById("run-" + b.dataset.fold));
    });
    stream(body.dataset.stream, {
      run: function (u) {
        var old = document.getElementById("run-" + u.id), gone = old ? Array.from(kids(u.id)) : [];
        if (u.html) {
          var frag = fragment(u.html);
          if (old) old.before(frag); else tbody.prepend(frag);
        }
        if (old) { old.remove(); gone.forEach(function (k) { k.remove(); }); }
        var row = document.getElementById("run-" + u.id);
        if (row && row.classList.contains("backlog")) applyFold(row);
        document.getElementById("no-runs").hidden = tbody.children.length > 0;
        tick();
      }
    });
    ["f-status", "f-workspace"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.addEventListener("change", function () { el.form.submit(); });
    });
  }

  var isRun = body.dataset.page === "run", isBacklog = body.dataset.page === "backlog";
  var run = body.dataset.run;
  // The newest event seq the page shows: a page read by refresh() at an
  // older seq than a stream update already shown is stale, not applied.
  var shownSeq = Number(body.dataset.seq) || 0;

  // Only the controls the run's state offers are shown (see offer.go).
  function offer(names, note) {
    document.querySelectorAll("[data-offer]").forEach(function (el) {
      el.hidden = names.indexOf(el.dataset.offer) < 0;
    });
    var n = document.getElementById("offer-note");
    n.textContent = note || "";
    n.hidden = !note;
  }

  // Replaces the children of #id with html, keeping the <details> the
  // user opened (data-keep) open.
  function swapKeeping(id, html) {
    var el = document.getElementById(id), kept = {};
    el.querySelectorAll("details[data-keep][open]").forEach(function (d) { kept[d.dataset.keep] = true; });
    el.replaceChildren(html);
    el.querySelectorAll("details[data-keep]").forEach(function (d) { if (kept[d.dataset.keep]) d.open = true; });
  }

  // Backlog page: its summary and task table follow the backlog and its
  // task runs.
  if (isBacklog) {
    stream(body.dataset.stream, {
      backlog: function (u, seq) {
        shownSeq = Math.max(shownSeq, seq);
        document.getElementById("summary").replaceChildren(fragment(u.summary));
        swapKeeping("tasks", fragment(u.tasks));
        if (u.offer) offer(u.offer, u.offer_note);
        tick();
      }
    });
  }

  // Run page.
  if (isRun) {
    stream(body.dataset.stream, {
      run: function (u, seq) {
        shownSeq = Math.max(shownSeq, seq);
        document.getElementById("summary").replaceChildren(fragment(u.summary));
        document.getElementById("charts").replaceChildren(fragment(u.charts));
        if (u.ledger) {
          // Keep the diffs and lists the user opened open.
          var open = {}, kept = {};
          document.querySelectorAll("details.diff[open]").forEach(function (d) {
            open[d.dataset.diff] = d.querySelector("pre").textContent;
          });
          document.querySelectorAll("details[data-keep][open]").forEach(function (d) { kept[d.dataset.keep] = true; });
          document.getElementById("ledger").replaceChildren(fragment(u.ledger));
          document.querySelectorAll("details.diff").forEach(function (d) {
            if (d.dataset.diff in open) {
              showDiff(d.querySelector("pre"), open[d.dataset.diff]);
              d.dataset.loaded = "1";
              d.open = true;
            }
          });
          document.querySelectorAll("details[data-keep]").forEach(function (d) { if (kept[d.dataset.keep]) d.open = true; });
          markLogStep();
        }
        if (u.offer) offer(u.offer, u.offer_note);
        tick();
      }
    });

    // The log pane follows the newest step's output (the live tail), or
    // shows one step the user chose in the ledger.
    var log = document.getElementById("log");
    var logStep = document.getElementById("log-step");
    var logLive = document.getElementById("log-live");
    var logES = null, pinned = 0;
    function onLog(u) {
      var stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
      if (u.start) {
        log.textContent = "";
        logStep.textContent = "#" + u.seq + " " + u.phase + " · iteration " + u.iteration;
      }
      if (u.text) {
        log.append(u.text);
        // Bound the page's memory: keep the last 256 KiB of text.
        if (log.textContent.length > 262144) log.textContent = log.textContent.slice(-196608);
      }
      if (stick) log.scrollTop = log.scrollHeight;
    }
    function openLog(seq) {
      if (logES) logES.close();
      pinned = seq;
      log.textContent = "";
      logStep.textContent = seq ? "#" + seq : "";
      logLive.hidden = !seq;
      markLogStep();
      var got = false;
      if (!seq) {
        logES = stream(body.dataset.log, { log: onLog });
        return;
      }
      logES = stream(body.dataset.log + "?step=" + seq, {
        log: function (u) { got = true; onLog(u); },
        // The step has ended and all of its log is shown: a stream left
        // open would reconnect and read it again.
        end: function () { if (logES) logES.close(); setLive(true); },
        error: function (es) {
          if (!got) { es.close(); log.textContent = "could not open the log of step #" + seq + "; reload the page"; }
        }
      });
    }
    function markLogStep() {
      document.querySelectorAll("[data-log-step]").forEach(function (b) {
        b.classList.toggle("open", pinned > 0 && Number(b.dataset.logStep) === pinned);
      });
    }
    document.addEventListener("click", function (ev) {
      var b = ev.target.closest && ev.target.closest("[data-log-step]");
      if (!b) return;
      openLog(Number(b.dataset.logStep));
      document.querySelector("section.log").scrollIntoView({ block: "nearest" });
    });
    logLive.addEventListener("click", function () { openLog(0); });
    openLog(0);

    // Diffs load when opened.
    document.addEventListener("toggle", function (ev) {
      var d = ev.target;
      if (!(d instanceof HTMLDetailsElement) || !d.open || !d.dataset.diff || d.dataset.loaded) return;
      d.dataset.loaded = "1";
      var pre = d.querySelector("pre");
      fetch(d.dataset.diff, { credentials: "same-origin" }).then(function (resp) {
        var ct = resp.headers.get("Content-Type") || "";
        return (ct.indexOf("json") >= 0 ? resp.json() : resp.text()).then(function (v) {
          if (!resp.ok) throw new Error(errorText(v, resp));
          if (typeof v === "string") return v;
          return v.diff || v.patch || JSON.stringify(v, null, 2);
        });
      }).then(function (text) { showDiff(pre, text || "(empty diff)"); },
        function (err) { pre.textContent = err.message; d.dataset.loaded = ""; });
    }, true);

    // A diff, one span per line, coloured by its first character.
    function showDiff(pre, text) {
      pre.textContent = "";
      text.replace(/\n$/, "").split("\n").forEach(function (line) {
        var span = document.createElement("span");
        var c = line.charAt(0);
        span.className = line.startsWith("@@") ? "hunk" : (c === "+" && !line.startsWith("+++")) ? "add" :
          (c === "-" && !line.startsWith("---")) ? "del" : "";
        span.textContent = line + "\n";
        pre.append(span);
      });
    }
  }

  // The buttons of a run's page and a backlog's page.
  if (isRun || isBacklog) {
    var result = document.getElementById("action-result");
    // act sends an action's request; task names the task of a retry,
    // already escaped for the path by the server (data-retry).
    function act(action, payload, task) {
      var path = { "stop": "stop", "stop-now": "stop", "pause": "pause", "signal": "signal", "answer": "answer", "resume": "resume", "land": "land" }[action];
      if (action === "retry") path = "tasks/" + task + "/retry";
      result.className = "pending";
      result.textContent = label(action) + "…";
      return fetch("/v1/runs/" + encodeURIComponent(run) + "/" + path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify(payload)
      }).then(function (resp) {
        return resp.text().then(function (t) {
          var v; try { v = JSON.parse(t); } catch (e) { v = t; }
          if (!resp.ok) throw new Error(errorText(v, resp));
          if (action === "land") return landOutcome(t);
          return label(action) + ": done — " + outcome(action, v || {});
        });
      }).then(function (text) {
        result.className = "ok";
        result.textContent = text;
        refresh();
      }, function (err) {
        result.className = "error";
        result.textContent = label(action) + ": " + err.message;
        refresh();
      });
    }
    // A request asked of a running step (pause, stop, signal) changes the
    // run without an event for the stream to carry: after each action the
    // page reads its own state again, so the buttons follow at once. The
    // page names the event seq it was read at (read before the run), so a
    // read that a stream update overtook is dropped rather than shown.
    function refresh() {
      fetch(location.pathname + location.search, { credentials: "same-origin" }).then(function (resp) {
        if (!resp.ok) return;
        return resp.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var seq = Number(doc.body.dataset.seq) || 0;
          if (seq < shownSeq) return; // the stream has shown newer already
          shownSeq = seq;
          var sum = doc.getElementById("summary");
          if (sum) document.getElementById("summary").replaceChildren.apply(document.getElementById("summary"), Array.from(sum.childNodes).map(function (n) { return document.importNode(n, true); }));
          var tasks = doc.getElementById("tasks");
          if (tasks && isBacklog) {
            var frag = document.createDocumentFragment();
            Array.from(tasks.childNodes).forEach(function (n) { frag.append(document.importNode(n, true)); });
            swapKeeping("tasks", frag);
          }
          var names = [];
          doc.querySelectorAll("[data-offer]").forEach(function (el) { if (!el.hidden) names.push(el.dataset.offer); });
          var note = doc.getElementById("offer-note");
          offer(names, note && !note.hidden ? note.textContent : "");
          tick();
        });
      }, function () { /* the stream still updates the page */ });
    }
    // A land answers with NDJSON: progress lines, then one result, refusal
    // or error, worded here as loopctl land prints them.
    function landOutcome(t) {
      var last = {};
      t.split("\n").forEach(function (l) {
        if (!l.trim()) return;
        try { var m = JSON.parse(l); if (m.result || m.refusal || m.error) last = m; } catch (e) { /* not a message */ }
      });
      var short = function (c) { return (c || "").slice(0, 12); };
      if (last.result) {
        var r = last.result;
        var v = r.verified ? (r.base_moved ? "verified: the merge with the moved " + r.base_branch + " (" + short(r.tested_commit) + ") passed verify_command"
          : "verified: the run's last verification of " + short(r.tested_commit) + " stands")
          : "NOT verified (" + (r.note || "").replace(/^not verified: /, "") + ")";
        return "land: landed " + r.branch + " into " + r.base_branch + " (" + r.mode + "): " + r.base_branch + " is now " + short(r.commit) + "\n" + v;
      }
      if (last.refusal) {
        var f = last.refusal, msg = "land refused (" + f.kind + "): " + f.message;
        if (f.output_tail) msg += "\n\nlast output of verify_command (all of it: " + f.log_path + "):\n  " + f.output_tail.replace(/\n$/, "").split("\n").join("\n  ");
        if (f.hand && f.hand.length) msg += "\n\nthe run's branch is " + f.branch + "; to finish by hand:\n  " + f.hand.join("\n  ");
        throw new Error(msg.replace(/^land refused/, "refused"));
      }
      if (last.error) throw new Error(errorText({ error: last.error }, {}));
      throw new Error("the daemon's answer ended before the land's outcome; see loopctl status");
    }
    function label(action) { return action === "stop-now" ? "stop --now" : action; }
    // What happened, in loopctl's words.
    function outcome(action, r) {
      var ended = ["COMPLETED", "FAILED", "ABORTED", "INTERRUPTED"].indexOf(r.status) >= 0;
      if (ended && action !== "land" && action !== "retry") return "the run ended " + r.status + (r.reason ? " (" + r.reason + ")" : "");
      switch (action) {
        case "stop": return "the run will stop after the current step (Stop now kills it)";
        case "stop-now": return "stopping now; its step is being killed";
        case "pause": return r.status === "PAUSED" ? "the run is PAUSED" : "the run will pause after the current step";
        case "signal": return "user_signal is set; it is evaluated after the current step";
        case "answer": return "answered; the run resumes with your answer in its next prompt";
        case "land": return "landed" + (r.landed_commit ? " as " + r.landed_commit.slice(0, 12) : "");
        case "retry": return "the task is re-opened (with the tasks skipped because of it); a new task run starts from the integration branch's tip";
      }
      return "the run is " + r.status;
    }
    // The daemon's error, worded as loopctl prints it.
    function errorText(v, resp) {
      if (v && v.error) {
        var e = v.error;
        return e.message + (e.details && e.details.length ? ":\n  " + e.details.join("\n  ") : "");
      }
      return (typeof v === "string" && v) ? v : resp.status + " " + resp.statusText;
    }
    // A blocked task's Retry (loopctl tasks --retry ID): its button is
    // re-rendered with the task table, so the click is caught above it.
    document.addEventListener("click", function (ev) {
      var b = ev.target.closest && ev.target.closest("button[data-retry]");
      if (b) act("retry", {}, b.dataset.retry);
    });
    document.querySelectorAll("button[data-action]").forEach(function (b) {
      b.addEventListener("click", function () {
        act(b.dataset.action, b.dataset.action === "stop-now" ? { now: true } : {});
      });
    });
    document.querySelectorAll("form[data-action]").forEach(function (f) {
      f.addEventListener("submit", function (ev) {
        ev.preventDefault();
        if (f.dataset.action === "resume") {
          var set = f.elements.set.value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
          act("resume", set.length ? { set: set } : {});
        } else if (f.dataset.action === "answer") {
          act("answer", { text: f.elements.text.value });
        } else {
          var p = {};
          if (f.elements.squash.checked) p.squash = true;
          if (f.elements.message.value.trim()) p.message = f.elements.message.value.trim();
          act("land", p);
        }
      });
    });
  }
  tick();
})();
