extension ConsolePage {
    /// The script: reads `/admin/console` every two seconds and draws it; Check and Apply POST `/admin/reload`.
    static let script = ##"""
        // Portico's operator console. Reads GET /admin/console every two seconds and draws it; "Check"
        // and "Apply" POST /admin/reload (with ?dryRun=true for a check). Every value from the gateway is
        // put into the page as text (textContent, SVG attributes), never as markup.
        "use strict";

        const refreshMilliseconds = 2000;
        const pageToken = document.querySelector('meta[name="portico-console-token"]').content;
        // The admin bearer token, when the listener needs one: kept in this page's memory only (never in
        // a URL, a cookie or storage), so closing the tab forgets it.
        let adminToken = "";
        let timer = null;
        let lastGeneration = null;

        function element(name, attributes = {}, ...children) {
          const node = document.createElement(name);
          for (const [key, value] of Object.entries(attributes)) {
            if (value === undefined || value === null || value === false) continue;
            if (key === "text") node.textContent = String(value);
            else node.setAttribute(key, value === true ? "" : String(value));
          }
          for (const child of children) {
            if (child === null || child === undefined) continue;
            node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
          }
          return node;
        }

        function svg(name, attributes = {}) {
          const node = document.createElementNS("http://www.w3.org/2000/svg", name);
          for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
          return node;
        }

        function table(caption, headings, rows, attributes = {}) {
          return element(
            "table", attributes,
            caption ? element("caption", { text: caption }) : null,
            element("thead", {}, element("tr", {}, ...headings.map((heading) => element("th", { scope: "col", text: heading })))),
            element("tbody", {}, ...rows.map((cells) => element("tr", {}, ...cells.map((cell) =>
              cell instanceof Node ? element("td", {}, cell) : element("td", { text: cell ?? "" }))))),
          );
        }

        function replace(id, ...children) {
          const container = document.getElementById(id);
          container.replaceChildren(...children.filter((child) => child !== null && child !== undefined));
        }

        function headers(extra = {}) {
          const fields = { Accept: "application/json", "X-Portico-Console": pageToken, ...extra };
          if (adminToken) fields.Authorization = "Bearer " + adminToken;
          return fields;
        }

        function say(text, kind = "") {
          const status = document.getElementById("status");
          status.textContent = text;
          status.dataset.kind = kind;
        }

        function duration(seconds) {
          const days = Math.floor(seconds / 86400), hours = Math.floor((seconds % 86400) / 3600);
          const minutes = Math.floor((seconds % 3600) / 60), rest = Math.floor(seconds % 60);
          if (days > 0) return `${days}d ${hours}h`;
          if (hours > 0) return `${hours}h ${minutes}m`;
          return minutes > 0 ? `${minutes}m ${rest}s` : `${rest}s`;
        }

        function number(value, digits = 0) {
          if (value === null || value === undefined || Number.isNaN(value)) return "–";
          return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
        }

        // MARK: Drawing each section

        function drawGateway(gateway) {
          const facts = [
            ["Generation", gateway.generation], ["Policy hash", gateway.hash.slice(0, 16)], ["Loaded", gateway.loadedAt],
            ["Up for", duration(gateway.uptimeSeconds)], ["State", gateway.draining ? "draining" : gateway.ready ? "serving" : "starting"],
          ];
          replace("gateway-facts", ...facts.flatMap(([name, value]) => [element("dt", { text: name }), element("dd", { text: value, "data-fact": name })]));
          replace("listeners", table("Listeners", ["Name", "Address", "Protocols", "Certificate", "Expires"],
            gateway.listeners.map((listener) => {
              const certificates = listener.certificates ?? [];
              return [listener.name, listener.address, listener.protocols.join(", "),
                certificates.map((certificate) => certificate.file).join("; ") || (listener.tls ? "" : "no TLS"),
                certificates.map((certificate) => (certificate.notAfter ? `${certificate.notAfter} (${certificate.daysLeft} days)` : "–")).join("; ")];
            })));
        }

        // A sparkline of `values` (one per slot, oldest first) with its numbers in a table beside it.
        function chart(label, values, unit, slotSeconds) {
          const width = 180, height = 36, max = Math.max(1, ...values.map((value) => value ?? 0));
          const step = values.length > 1 ? width / (values.length - 1) : width;
          const points = values.map((value, index) => `${(index * step).toFixed(1)},${(height - ((value ?? 0) / max) * (height - 2) - 1).toFixed(1)}`);
          const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `${label}, last ${values.length} slots of ${slotSeconds} s` });
          picture.append(svg("polyline", { points: points.join(" "), fill: "none", class: "line" }));
          const latest = values.length ? values[values.length - 1] : null;
          const recent = values.map((value, index) => [`-${(values.length - 1 - index) * slotSeconds}s`, value === null ? "–" : number(value, unit === "ms" ? 1 : 2)]).slice(-12).reverse();
          return element("figure", { class: "chart" },
            element("figcaption", {}, element("span", { text: label }), element("strong", { class: "latest", text: `${latest === null ? "–" : number(latest, unit === "ms" ? 1 : 2)} ${unit}` })),
            picture,
            element("details", {}, element("summary", { text: "Numbers" }), table(null, ["Slot", unit], recent)));
        }

        function drawTraffic(traffic) {
          if (!traffic.series.length) return replace("traffic-body", element("p", { text: "No requests yet." }));
          replace("traffic-body", ...traffic.series.map((series) => {
            const seconds = traffic.slotSeconds;
            const perSecond = series.requests.map((count) => count / seconds);
            const classes = Object.entries(series.totals.statusClasses).filter(([, count]) => count > 0);
            return element("article", { class: "series", "data-service": series.service, "data-version": series.version },
              element("h3", { text: `${series.service} v${series.version}` }),
              element("p", { class: "totals" },
                element("span", { "data-total": "requests", text: `${number(series.totals.requests)} requests in 15 min` }), " · ",
                ...classes.flatMap(([name, count], index) => [index ? ", " : "", element("span", { class: `status s${name[0]}`, text: `${name} ${number(count)}` })])),
              element("div", { class: "charts" },
                chart("Requests/s", perSecond, "req/s", seconds),
                chart("4xx/s", series.clientErrors.map((count) => count / seconds), "req/s", seconds),
                chart("5xx/s", series.serverErrors.map((count) => count / seconds), "req/s", seconds),
                chart("p50", series.p50Ms, "ms", seconds),
                chart("p99", series.p99Ms, "ms", seconds)));
          }));
        }

        // Buckets per platform on one ordinal axis of the versions that bound them.
        function bucketPicture(buckets) {
          // SemVer precedence: the numbers, then a pre-release before its release (2.0.0-0 < 2.0.0),
          // pre-release identifiers numeric before alphanumeric; build metadata ignored.
          const identifiers = (text) => text.split(".").map((part) => (/^\d+$/.test(part) ? Number(part) : part));
          const compareIdentifiers = (a, b) => {
            for (let index = 0; index < Math.max(a.length, b.length); index += 1) {
              if (a[index] === undefined) return -1;
              if (b[index] === undefined) return 1;
              if (a[index] === b[index]) continue;
              if (typeof a[index] !== typeof b[index]) return typeof a[index] === "number" ? -1 : 1;
              return a[index] < b[index] ? -1 : 1;
            }
            return 0;
          };
          const compare = (left, right) => {
            const [leftCore, ...leftPre] = left.split("+")[0].split("-");
            const [rightCore, ...rightPre] = right.split("+")[0].split("-");
            const core = compareIdentifiers(identifiers(leftCore), identifiers(rightCore));
            if (core !== 0) return core;
            if (!leftPre.length || !rightPre.length) return rightPre.length - leftPre.length;
            return compareIdentifiers(identifiers(leftPre.join("-")), identifiers(rightPre.join("-")));
          };
          const bounds = [...new Set(buckets.flatMap((bucket) => [bucket.from, bucket.to]).filter(Boolean))].sort(compare);
          const rows = [...new Set(buckets.map((bucket) => bucket.platforms.join(", ") || "any platform"))];
          const width = 360, rowHeight = 22, left = 92, inner = width - left - 8;
          const position = (version, end) => {
            if (!version) return end ? inner : 0;
            return bounds.length < 2 ? inner / 2 : (bounds.indexOf(version) / (bounds.length - 1)) * (inner - 40) + 20;
          };
          const picture = svg("svg", { viewBox: `0 0 ${width} ${rows.length * rowHeight + 18}`, class: "buckets", role: "img", "aria-label": "Compatibility buckets by platform" });
          rows.forEach((row, rowIndex) => {
            const y = rowIndex * rowHeight;
            const name = svg("text", { x: 0, y: y + 15, class: "axis" });
            name.textContent = row;
            picture.append(name);
            for (const bucket of buckets.filter((each) => (each.platforms.join(", ") || "any platform") === row)) {
              const x = left + position(bucket.from, false), end = left + position(bucket.to, true);
              picture.append(svg("rect", { x, y: y + 3, width: Math.max(4, end - x), height: rowHeight - 6, rx: 3, class: `bucket v${bucket.version % 6}` }));
              const label = svg("text", { x: x + 4, y: y + 15, class: "label" });
              label.textContent = `v${bucket.version}`;
              picture.append(label);
            }
          });
          bounds.forEach((version) => {
            const tick = svg("text", { x: left + position(version, false), y: rows.length * rowHeight + 14, class: "axis tick" });
            tick.textContent = version;
            picture.append(tick);
          });
          return picture;
        }

        // What a facade version's sources did: answers by source, fallbacks, the shadow's comparisons.
        function facadeCounts(counts) {
          const served = Object.entries(counts.served).map(([source, count]) => `${source} ${number(count)}`).join(", ") || "no answer yet";
          const shadow = Object.entries(counts.shadow).map(([result, count]) => `${result.replace("_", " ")} ${number(count)}`).join(", ");
          return `served: ${served}; by a fallback: ${number(counts.fallbacksServed)}` + (shadow ? `; shadow: ${shadow}` : "");
        }

        function drawServices(services) {
          replace("services-body", ...services.map((service) => element("article", { class: "service", "data-service": service.name },
            element("h3", { text: service.name }),
            element("p", { class: "meta", text: `${service.path} · auth ${service.auth} · default ${service.defaultVersion}` +
              (service.minimumClientVersion ? ` · clients ≥ ${service.minimumClientVersion}` : "") }),
            table("Versions", ["Version", "Handler", "Facade sources", "Since start"], service.versions.map((version) => [
              `v${version.version}`, version.handler,
              (version.sources ?? []).map((source) => `${source.name} (${source.role})`).join(", "),
              version.facade ? facadeCounts(version.facade) : "",
            ]), { class: "versions" }),
            service.buckets.length ? element("div", { class: "bucket-block" },
              element("h4", { text: "Compatibility buckets" }),
              bucketPicture(service.buckets),
              element("ul", { class: "bucket-list" }, ...service.buckets.map((bucket) => element("li", { text: bucket.text })))) : null)));
        }

        function drawLimits(limits) {
          replace("limits-body",
            table("Refusals since start", ["Kind", "Count"], Object.entries(limits.refusals).map(([kind, count]) => [kind, number(count)])),
            limits.nearest.length
              ? table("Buckets nearest to empty", ["Limit", "Bucket", "Remaining", "Burst"], limits.nearest.map((bucket) => [
                `${bucket.scope} ${bucket.name}${bucket.service ? " for " + bucket.service : ""}`, bucket.subject || "–", number(bucket.remaining), number(bucket.burst)]))
              : element("p", { text: limits.shared ? "Buckets live in the fleet's Redis." : "No bucket has been drawn from yet." }));
        }

        function drawBackends(backends) {
          replace("backends-body", table(null, ["Backend", "In flight", "Errors", "Retries", "Targets"], backends.map((backend) => [
            backend.name, backend.inFlight == null ? "not counted" : number(backend.inFlight), number(backend.errors), number(backend.retries),
            backend.targets.map((target) => `${target.url} ${target.up ? "up" : "down"}, ${target.health === "unknown" ? "unchecked" : target.health}` +
              (target.ejectedForSeconds ? `, ejected for ${target.ejectedForSeconds} s` : "")).join("; "),
          ])));
        }

        function drawKeys(keys) {
          replace("keys-body", table(null, ["Key id", "Status", "Tier", "Services", "Rotation"], keys.map((key) => [
            key.id, key.status, key.tier ?? "–", key.services.join(", "),
            key.rotating ? `previous secret accepted${key.previousSecretUntil ? " until " + key.previousSecretUntil : ""}` : "–",
          ])));
        }

        function drawFleet(fleet) {
          if (!fleet) return replace("fleet-body", element("p", { text: "Not in fleet mode: limits and nonces are this gateway's own." }));
          replace("fleet-body", element("dl", {},
            element("dt", { text: "Redis" }), element("dd", { text: fleet.redis }),
            element("dt", { text: "Breaker" }), element("dd", { text: fleet.breakers.join(", "), "data-fact": "breaker" }),
            element("dt", { text: "On failure" }), element("dd", { text: `limits ${fleet.onFailure.limits}, nonces ${fleet.onFailure.nonces}` })));
        }

        function drawProblems(problems) {
          if (!problems.length) return replace("problems-body", element("p", { text: "No problem answered yet." }));
          const rows = (list) => list.map((problem) => [
            problem.time.replace("T", " ").replace("Z", ""), String(problem.status), problem.type.replace("urn:portico:problem:", ""),
            problem.service ?? "–", problem.requestId,
          ]);
          const headings = ["Time (UTC)", "Status", "Type", "Service", "Request id"];
          replace("problems-body",
            table(`${problems.length} most recent, newest first`, headings, rows(problems.slice(0, 8))),
            problems.length > 8 ? element("details", {}, element("summary", { text: `${problems.length - 8} more` }), table(null, headings, rows(problems.slice(8)))) : null);
        }

        // MARK: Reading

        // One read and drawing; says what went wrong, if anything. True to go on polling.
        async function refresh() {
          let response;
          try {
            // A gateway that does not answer within 10 s is reported, and asked again.
            response = await fetch("/admin/console", { headers: headers(), cache: "no-store", signal: AbortSignal.timeout(10000) });
          } catch (error) {
            say(`The gateway cannot be reached (${error.message}).`, "error");
            return true;
          }
          if (response.status === 401) {
            document.getElementById("auth").hidden = false;
            say(adminToken ? "That token was refused." : "This admin listener needs its token.", "error");
            return false;
          }
          if (!response.ok) {
            say(`The gateway answered ${response.status}.`, "error");
            return true;
          }
          try {
            const state = await response.json();
            document.getElementById("auth").hidden = true;
            drawGateway(state.gateway);
            drawTraffic(state.traffic);
            drawServices(state.services);
            drawLimits(state.limits);
            drawBackends(state.backends);
            drawKeys(state.keys);
            drawFleet(state.fleet);
            drawProblems(state.problems);
            const changed = lastGeneration !== null && lastGeneration !== state.gateway.generation;
            say(changed ? `Policy generation ${state.gateway.generation} is active.` : `Live: generation ${state.gateway.generation}.`, "ok");
            lastGeneration = state.gateway.generation;
            document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed ?? "0") + 1);
          } catch (error) {
            say(`The gateway's answer could not be shown (${error.message}).`, "error");
          }
          return true;
        }

        // Polls every two seconds after the last read ended (reads never pile up), and not at all
        // while the tab is hidden.
        async function poll(generation) {
          if (generation !== polling) return;
          const goOn = document.hidden ? true : await refresh();
          if (goOn && generation === polling) timer = setTimeout(() => poll(generation), refreshMilliseconds);
        }

        let polling = 0;

        function start() {
          stop();
          polling += 1;
          poll(polling);
        }

        function stop() {
          if (timer !== null) clearTimeout(timer);
          timer = null;
          polling += 1;
        }

        document.addEventListener("visibilitychange", () => { if (!document.hidden && timer !== null) start(); });

        // MARK: Reload

        function drawReport(report, dryRun) {
          const container = document.getElementById("reload-result");
          if (report.errors) {
            container.dataset.outcome = "refused";
            return container.replaceChildren(
              element("p", { class: "refused", text: report.detail }),
              table("Errors", ["File", "Line", "Key path", "Message"], report.errors.map((error) => [error.file, error.line ?? "", error.keyPath, error.message])));
          }
          container.dataset.outcome = report.result;
          const sections = Object.entries(report.changes).filter(([, change]) => change.added.length + change.removed.length + change.changed.length > 0);
          const heading = dryRun ? "Check: what applying would change" : report.applied ? `Applied: generation ${report.generation}` : "Nothing changed";
          container.replaceChildren(...[
            element("p", { class: "reported", text: heading }),
            sections.length
              ? table("Changes by section", ["Section", "Added", "Removed", "Changed"], sections.map(([name, change]) => [
                name, change.added.join(", "), change.removed.join(", "), change.changed.join(", ")]), { class: "diff" })
              : element("p", { text: "The files on disk match the active policy." }),
            report.warnings.length ? element("ul", { class: "warnings" }, ...report.warnings.map((warning) => element("li", { text: warning }))) : null,
            report.restartRequired.length ? element("p", { text: `Needs a restart: ${report.restartRequired.join(", ")}` }) : null,
          ].filter((child) => child !== null));
        }

        async function reload(dryRun) {
          const buttons = document.querySelectorAll("#reload button");
          buttons.forEach((button) => { button.disabled = true; });
          try {
            const response = await fetch(dryRun ? "/admin/reload?dryRun=true" : "/admin/reload", {
              method: "POST", headers: headers(), cache: "no-store",
            });
            const body = await response.json().catch(() => ({ detail: `The gateway answered ${response.status}.`, errors: [] }));
            if (response.status === 401) document.getElementById("auth").hidden = false;
            if (!response.ok && !body.errors) body.errors = [];
            drawReport(body, dryRun);
            if (!dryRun) refresh();
          } catch (error) {
            say(`The reload request failed (${error.message}).`, "error");
          } finally {
            buttons.forEach((button) => { button.disabled = false; });
          }
        }

        document.getElementById("check").addEventListener("click", () => reload(true));
        document.getElementById("apply").addEventListener("click", () => reload(false));
        document.getElementById("auth").addEventListener("submit", (event) => {
          event.preventDefault();
          const field = document.getElementById("token");
          adminToken = field.value;
          field.value = "";
          start();
        });
        start();
        """##
}
