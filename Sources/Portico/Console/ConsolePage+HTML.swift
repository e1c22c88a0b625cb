extension ConsolePage {
    /// The page: its sections, which the script fills. `{{token}}` becomes the page's token.
    static let html = ##"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <meta name="portico-console-token" content="{{token}}">
        <title>Portico console</title>
        <link rel="icon" href="data:,">
        <link rel="stylesheet" href="/console/console.css">
        <script src="/console/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to the gateway</a>
        <header>
          <h1>Portico</h1>
          <p id="status" role="status" aria-live="polite">Loading…</p>
        </header>
        <form id="auth" hidden>
          <label for="token">Admin token</label>
          <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required>
          <button type="submit">Use token</button>
        </form>
        <nav aria-label="Sections">
          <a href="#gateway">Gateway</a> <a href="#traffic">Traffic</a> <a href="#services">Services</a> <a href="#limits">Limits</a>
          <a href="#backends">Backends</a> <a href="#keys">Keys</a> <a href="#fleet">Fleet</a> <a href="#problems">Problems</a>
          <a href="#reload">Reload</a>
        </nav>
        <main id="main">
          <section id="gateway" aria-labelledby="gateway-title">
            <h2 id="gateway-title">Gateway</h2>
            <dl id="gateway-facts"></dl>
            <div id="listeners"></div>
          </section>
          <section id="traffic" aria-labelledby="traffic-title">
            <h2 id="traffic-title">Traffic, last 15 minutes</h2>
            <div id="traffic-body"></div>
          </section>
          <section id="services" aria-labelledby="services-title">
            <h2 id="services-title">Services</h2>
            <div id="services-body"></div>
          </section>
          <section id="limits" aria-labelledby="limits-title">
            <h2 id="limits-title">Rate limits</h2>
            <div id="limits-body"></div>
          </section>
          <section id="backends" aria-labelledby="backends-title">
            <h2 id="backends-title">Backends</h2>
            <div id="backends-body"></div>
          </section>
          <section id="keys" aria-labelledby="keys-title">
            <h2 id="keys-title">Keys</h2>
            <div id="keys-body"></div>
          </section>
          <section id="fleet" aria-labelledby="fleet-title">
            <h2 id="fleet-title">Fleet</h2>
            <div id="fleet-body"></div>
          </section>
          <section id="problems" aria-labelledby="problems-title">
            <h2 id="problems-title">Last problems answered</h2>
            <div id="problems-body"></div>
          </section>
          <section id="reload" aria-labelledby="reload-title">
            <h2 id="reload-title">Reload the policy</h2>
            <p>Reads the policy files again. <em>Check</em> only reports what would change; <em>Apply</em> makes it active.</p>
            <p class="actions"><button type="button" id="check">Check</button> <button type="button" id="apply">Apply</button></p>
            <div id="reload-result" aria-live="polite"></div>
          </section>
        </main>
        </body>
        </html>
        """##
}
