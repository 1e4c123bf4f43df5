/// The console's style sheet and its one script. The pages work without the script (every action
/// is a form); with it, they follow the store live: the payment queue's events arrive as
/// server-sent events (`/events`), each transaction as its table row, rendered by the server.
enum ConsoleAssets {
    static let css = #"""
        :root { --ink: #1b1f24; --muted: #4a5360; --line: #c7ccd3; --link: #0b4fa8; --bg: #ffffff; --panel: #f4f6f8; --ok: #0f6b2f; --bad: #a1161b; --warn: #7a4b00; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
        a { color: var(--link); }
        a:focus, button:focus, input:focus, select:focus, textarea:focus, summary:focus { outline: 3px solid #f5a623; outline-offset: 2px; }
        .skip { position: absolute; left: -999px; top: 0; background: var(--ink); color: #fff; padding: .5em 1em; }
        .skip:focus { left: 0; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: 1em; padding: .5em 1.5em; background: #102a43; color: #fff; }
        header.top a { color: #fff; }
        header.top .brand { margin: 0; font-weight: 700; }
        header.top nav ul { display: flex; gap: 1em; list-style: none; margin: 0; padding: 0; }
        header.top .logout { margin-left: auto; }
        main { padding: 1em 1.5em 3em; max-width: 90em; }
        footer.bottom { padding: 1em 1.5em; color: var(--muted); border-top: 1px solid var(--line); }
        h1 { margin: .3em 0 .6em; font-size: 1.7em; overflow-wrap: anywhere; }
        h2 { margin-top: 1.6em; font-size: 1.3em; }
        table { border-collapse: collapse; width: 100%; margin: .5em 0 1em; }
        caption { text-align: left; color: var(--muted); padding: .3em 0; }
        th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
        thead th { background: var(--panel); }
        .card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .6em 1em; margin: .8em 0; }
        .card.danger { border-color: var(--bad); }
        .narrow { max-width: 30em; }
        .actions { display: flex; flex-wrap: wrap; gap: .6em; align-items: center; margin: .5em 0; }
        .actions form { display: inline-flex; flex-wrap: wrap; gap: .4em; align-items: center; }
        fieldset { border: 0; padding: 0; margin: 0; }
        legend { font-weight: 600; }
        label { font-weight: 500; }
        input, select, textarea, button { font: inherit; }
        input:not([type=checkbox]), select, textarea { padding: .3em .4em; border: 1px solid #6b7580; border-radius: 4px; max-width: 100%; }
        textarea { width: 100%; }
        button { padding: .35em .9em; border: 1px solid #0b3d91; border-radius: 4px; background: #0b4fa8; color: #fff; cursor: pointer; }
        .danger button { background: var(--bad); border-color: #7d0f13; }
        header.top button { background: transparent; border-color: #fff; }
        .flash { padding: .6em 1em; border-radius: 6px; margin: .6em 0 1em; border: 1px solid; }
        .flash.ok { background: #e8f5ec; border-color: var(--ok); color: var(--ok); }
        .flash.error { background: #fbeaea; border-color: var(--bad); color: var(--bad); }
        .state { font-weight: 600; }
        .state-purchased, .state-restored, .state-active, .state-valid { color: var(--ok); }
        .state-failed, .state-expired, .state-revoked, .state-invalid { color: var(--bad); }
        .state-deferred, .state-purchasing, .state-billing-retry, .state-grace-period { color: var(--warn); }
        .tag { display: inline-block; max-width: 100%; overflow-wrap: anywhere; background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: 0 .4em; margin: .1em 0; }
        td.price { white-space: nowrap; }
        .empty, .live { color: var(--muted); }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1.2em; }
        .facts dt { font-weight: 600; }
        .facts dd { margin: 0; overflow-wrap: anywhere; }
        .trail ol { list-style: none; display: flex; gap: .5em; padding: 0; margin: .5em 0 0; }
        .trail li + li::before { content: "›"; margin-right: .5em; color: var(--muted); }
        .activity { padding-left: 1.2em; }
        .receipt-data { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .8em; }
        tr.fresh { animation: fresh 2s ease-out; }
        @keyframes fresh { from { background: #fff4c2; } to { background: transparent; } }
        @media (prefers-reduced-motion: reduce) { tr.fresh { animation: none; } }
        """#

    static let javascript = #"""
        // StoreBus console: live pages. The server renders every row; this script only puts the rows
        // it streams where they belong, and keeps the stream going across reconnects (the browser's
        // EventSource sends the last event's id, the positions in the payment queue's log, again).
        "use strict";
        (function () {
          var holder = document.querySelector("[data-live-stream]");
          if (!holder || !window.EventSource) { return; }
          var state = holder.querySelector("[data-live-state]");
          var say = function (text) { if (state) { state.textContent = text; } };
          var source = new EventSource(holder.getAttribute("data-live-stream"));
          // How many times the stream was opened (again, after each end or loss), for people and tests.
          var opens = 0;
          source.onopen = function () {
            opens += 1;
            holder.setAttribute("data-live-opens", String(opens));
            say("Live: new transactions and changes appear as they happen.");
          };
          source.onerror = function () {
            // Closed for good (the login ended, say): the browser will not try again by itself.
            say(source.readyState === EventSource.CLOSED
              ? "The live stream stopped: reload the page (and log in again if asked)."
              : "Reconnecting to the live stream…");
          };
          var rows = function (html) {
            var template = document.createElement("template");
            template.innerHTML = html.trim();
            return template.content.firstElementChild;
          };
          source.addEventListener("transaction", function (event) {
            var row = rows(event.data);
            var table = document.querySelector("[data-live-transactions] tbody");
            if (!row || !table) { return; }
            var known = document.getElementById(row.id);
            if (known) { known.replaceWith(row); } else { table.insertBefore(row, table.firstChild); }
            row.classList.add("fresh");
            var empty = document.querySelector("[data-live-empty]");
            if (empty) { empty.remove(); }
            while (table.rows.length > 500) { table.deleteRow(table.rows.length - 1); }
          });
          source.addEventListener("activity", function (event) {
            var list = document.querySelector("[data-live-activity]");
            var item = rows(event.data);
            if (list && item) { list.insertBefore(item, list.firstChild); }
            refreshDownloads();
          });
          // Downloads in progress: the section is fetched again every 2 s while one is active.
          var refreshing = false;
          function refreshDownloads() {
            var section = document.getElementById("downloads");
            if (!section || refreshing) { return; }
            refreshing = true;
            fetch(window.location.href, { credentials: "same-origin" }).then(function (response) { return response.text(); }).then(function (text) {
              var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("downloads");
              if (fresh) { section.replaceWith(fresh); }
            }).catch(function () {}).then(function () { refreshing = false; });
          }
          setInterval(function () { if (document.querySelector("[data-live-downloads]")) { refreshDownloads(); } }, 2000);
        })();
        """#
}
