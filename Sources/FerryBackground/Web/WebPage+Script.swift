extension WebPage {
    /// The page's style (allowed by its hash).
    static let style = #"""

        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
        header { display: flex; align-items: baseline; gap: 1em; padding: .6em 1.2em; background: #14395b; color: #fff; }
        h1 { font-size: 1.3em; margin: 0; }
        main { padding: 1em 1.2em; }
        form { display: flex; flex-wrap: wrap; gap: .6em 1em; align-items: end; margin-bottom: .6em; }
        label { display: flex; flex-direction: column; font-size: .85em; color: #4a5560; }
        input, select { font: inherit; padding: .3em .4em; border: 1px solid #b8c0c8; border-radius: 4px; }
        #url { width: 28em; } #folder { width: 16em; } #connections { width: 4em; }
        button { font: inherit; padding: .3em .8em; border: 1px solid #14395b; border-radius: 4px;
          background: #fff; color: #14395b; cursor: pointer; }
        button[type=submit] { background: #14395b; color: #fff; }
        table { border-collapse: collapse; width: 100%; background: #fff; }
        th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid #e3e6ea; white-space: nowrap; }
        td.file { white-space: normal; word-break: break-all; }
        progress { width: 12em; vertical-align: middle; margin-right: .5em; }
        td.actions button { margin-right: .3em; }
        tr.failed td.state, #message.error { color: #b3261e; }
        tr.completed td.state { color: #1b6e2a; }
        #empty[hidden] { display: none; }
        nav { display: flex; gap: .6em; align-items: center; margin: .6em 0; }

        """#

    /// The page's script (allowed by its hash): the list, the form and the buttons.
    static let script = #"""

        "use strict";
        (() => {
          // The token leaves the address bar (and the history) at once; the tab keeps it for
          // its API calls, and a cookie the page came with lets a reload fetch the page again.
          const given = new URLSearchParams(location.search).get("token");
          if (given) {
            sessionStorage.setItem("ferry-token", given);
            history.replaceState(null, "", "/");
          }
          const token = given || sessionStorage.getItem("ferry-token") || "";
          const $ = (id) => document.getElementById(id);
          const samples = new Map();
          const rows = new Map();

          function say(text, isError) {
            $("message").textContent = text;
            $("message").className = isError ? "error" : "";
          }

          async function api(method, path, body) {
            const init = { method, cache: "no-store", headers: { "Authorization": "Bearer " + token } };
            if (body !== undefined) {
              init.headers["Content-Type"] = "application/json";
              init.body = JSON.stringify(body);
            }
            const response = await fetch(path, init);
            const text = await response.text();
            const value = text ? JSON.parse(text) : {};
            if (!response.ok) throw new Error(value.error ? value.error.message : "HTTP " + response.status);
            return value;
          }

          function size(bytes) {
            const units = ["B", "KiB", "MiB", "GiB", "TiB"];
            let value = bytes, unit = 0;
            while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
            return (unit ? value.toFixed(1) : String(value)) + " " + units[unit];
          }

          function duration(seconds) {
            if (!isFinite(seconds) || seconds < 0) return "";
            const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
            return h ? h + " h " + m + " min" : m ? m + " min " + (s % 60) + " s" : s + " s";
          }

          // Bytes per second from successive samples, smoothed; 0 unless running.
          function rate(task, now) {
            const last = samples.get(task.id);
            if (!last || task.bytesReceived < last.bytes) {
              samples.set(task.id, { time: now, bytes: task.bytesReceived, rate: 0 });
              return 0;
            }
            const elapsed = (now - last.time) / 1000;
            if (elapsed >= 0.5) {
              const current = (task.bytesReceived - last.bytes) / elapsed;
              last.rate = last.rate ? 0.6 * current + 0.4 * last.rate : current;
              last.time = now;
              last.bytes = task.bytesReceived;
            }
            return task.state === "running" ? last.rate : 0;
          }

          function actionsFor(state) {
            if (state === "running" || state === "queued") return ["pause", "cancel"];
            if (state === "paused" || state === "failed") return ["resume", "cancel"];
            return [];
          }

          function rowFor(task) {
            let row = rows.get(task.id);
            if (row) return row;
            row = document.createElement("tr");
            row.dataset.id = task.id;
            for (const name of ["id", "file", "state", "progress", "rate", "eta", "actions"]) {
              const cell = document.createElement("td");
              cell.className = name;
              row.appendChild(cell);
            }
            row.cells[0].textContent = String(task.id);
            const parts = task.destination.split("/");
            row.cells[1].textContent = parts[parts.length - 1];
            row.cells[1].title = task.url + " \u2192 " + task.destination;
            const bar = document.createElement("progress");
            const label = document.createElement("span");
            row.cells[3].append(bar, label);
            rows.set(task.id, row);
            return row;
          }

          function update(task, now) {
            const row = rowFor(task);
            const perSecond = rate(task, now);
            const expected = task.bytesExpected;
            row.dataset.received = String(task.bytesReceived);
            row.cells[2].textContent = task.state + (task.errorMessage ? ": " + task.errorMessage : "");
            const bar = row.cells[3].firstChild;
            if (expected) { bar.max = expected; bar.value = task.bytesReceived; } else { bar.removeAttribute("value"); }
            row.cells[3].lastChild.textContent = size(task.bytesReceived) + (expected
              ? " of " + size(expected) + " (" + Math.floor((100 * task.bytesReceived) / expected) + " %)" : "");
            row.cells[4].textContent = perSecond > 0 ? size(Math.round(perSecond)) + "/s" : "";
            row.cells[5].textContent = perSecond > 0 && expected ? duration((expected - task.bytesReceived) / perSecond) : "";
            if (row.dataset.state !== task.state) {
              row.dataset.state = task.state;
              row.className = task.state;
              row.cells[6].replaceChildren(...actionsFor(task.state).map((action) => {
                const button = document.createElement("button");
                button.type = "button";
                button.className = action;
                button.dataset.action = action;
                button.textContent = action[0].toUpperCase() + action.slice(1);
                return button;
              }));
            }
            return perSecond;
          }

          // A page of the list, never the whole store: what runs first, then what waits,
          // then what ended, each by id; the totals of every state beside it.
          const order = ["running", "queued", "paused", "failed", "completed", "canceled"];
          const pageSize = 100;
          // Where the page shown starts (the previous pages' cursors, for "Previous"), and
          // where the next one would.
          const starts = [];
          let start = null;
          let next = null;

          async function refresh() {
            try {
              const filter = $("filter").value;
              let path = "/v1/tasks?limit=" + pageSize + "&state=" + (filter || order.join(","));
              if (start) path += "&after=" + encodeURIComponent(start);
              const { tasks, totals } = await api("GET", path);
              const now = performance.now();
              const body = $("tasks").tBodies[0];
              let total = 0;
              for (const task of tasks) total += update(task, now);
              const seen = new Set(tasks.map((task) => task.id));
              for (const id of [...rows.keys()]) if (!seen.has(id)) { rows.delete(id); samples.delete(id); }
              body.replaceChildren(...tasks.map((task) => rows.get(task.id)));
              $("empty").hidden = tasks.length > 0 || start !== null;
              const last = tasks[tasks.length - 1];
              next = tasks.length === pageSize ? last.state + ":" + last.id : null;
              $("next").disabled = next === null;
              $("previous").disabled = start === null;
              const counts = order.filter((state) => (totals || {})[state]).map((state) => totals[state] + " " + state);
              $("summary").textContent = (counts.length ? counts.join(" \u00b7 ") : "no tasks")
                + (total > 0 ? " \u00b7 " + size(Math.round(total)) + "/s" : "");
            } catch (error) {
              say("The daemon did not answer: " + error.message, true);
            }
          }

          $("next").addEventListener("click", () => {
            if (next === null) return;
            starts.push(start);
            start = next;
            refresh();
          });
          $("previous").addEventListener("click", () => {
            start = starts.length ? starts.pop() : null;
            refresh();
          });
          $("filter").addEventListener("change", () => {
            starts.length = 0;
            start = null;
            refresh();
          });

          $("tasks").tBodies[0].addEventListener("click", async (event) => {
            const button = event.target.closest("button[data-action]");
            if (!button) return;
            const id = button.closest("tr").dataset.id;
            try {
              await api("POST", "/v1/tasks/" + id + "/" + button.dataset.action, {});
              say("");
            } catch (error) {
              say(error.message, true);
            }
            refresh();
          });

          $("add").addEventListener("submit", async (event) => {
            event.preventDefault();
            const url = $("url").value.trim();
            let name = $("filename").value.trim();
            if (!name) {
              try { name = decodeURIComponent(new URL(url).pathname.split("/").pop()); } catch (error) { name = ""; }
            }
            if (!name || name === "." || name === "..") name = "index.html";
            const destination = $("folder").value.trim().replace(/\/+$/, "") + "/" + name.replace(/\//g, "_");
            const request = { url, destination };
            const connections = parseInt($("connections").value, 10);
            if (connections > 1) request.connections = connections;
            try {
              const task = await api("POST", "/v1/tasks", request);
              say("Added #" + task.id + ": " + destination);
              $("url").value = "";
              $("filename").value = "";
            } catch (error) {
              say(error.message, true);
            }
            refresh();
          });

          $("clean").addEventListener("click", async () => {
            try {
              const { removed } = await api("POST", "/v1/clean", {});
              say("Cleared " + removed + " finished.");
            } catch (error) {
              say(error.message, true);
            }
            refresh();
          });

          $("folder").value = document.querySelector('meta[name="ferry-save-to"]').content;
          refresh();
          setInterval(refresh, 1000);
        })();

        """#
}
