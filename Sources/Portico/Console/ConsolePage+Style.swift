extension ConsolePage {
    /// The style: light and dark (`prefers-color-scheme`), one column below 760 px.
    static let style = ##"""
        :root {
          --page: #f7f7f5; --card: #ffffff; --ink: #1d1d1f; --muted: #5f6368; --rule: #d9d9d6; --accent: #0b57d0;
          --ok: #1e7e34; --warn: #a15c00; --bad: #b3261e;
          --v0: #0b57d0; --v1: #1e7e34; --v2: #a15c00; --v3: #7b1fa2; --v4: #00838f; --v5: #b3261e;
          font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 15px; line-height: 1.45;
          color: var(--ink); background: var(--page);
        }
        @media (prefers-color-scheme: dark) {
          :root {
            --page: #151618; --card: #1f2023; --ink: #e8e8e6; --muted: #a6a9ad; --rule: #3a3b3f; --accent: #8ab4f8;
            --ok: #81c995; --warn: #fdd663; --bad: #f28b82;
            --v0: #8ab4f8; --v1: #81c995; --v2: #fdd663; --v3: #d7aefb; --v4: #78d9ec; --v5: #f28b82;
          }
        }
        * { box-sizing: border-box; }
        body { margin: 0 auto; max-width: 1280px; padding: 0 16px 48px; }
        header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
        h1 { font-size: 1.5rem; margin: 16px 0 8px; }
        h2 { font-size: 1.15rem; margin: 0 0 8px; }
        h3 { font-size: 1rem; margin: 12px 0 4px; }
        h4 { font-size: 0.9rem; margin: 8px 0 4px; color: var(--muted); }
        #status { margin: 0; color: var(--muted); }
        #status[data-kind="error"] { color: var(--bad); }
        #status[data-kind="ok"] { color: var(--ok); }
        nav { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 4px 0 12px; }
        a { color: var(--accent); }
        a:focus-visible, button:focus-visible, input:focus-visible, summary:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
        .skip { position: absolute; left: -9999px; }
        .skip:focus { left: 16px; top: 8px; background: var(--card); padding: 4px 8px; }
        main { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; }
        section { background: var(--card); border: 1px solid var(--rule); border-radius: 8px; padding: 12px 16px; min-width: 0; overflow-x: auto; }
        #traffic, #services, #problems, #reload { grid-column: 1 / -1; }
        @media (max-width: 760px) { main { grid-template-columns: minmax(0, 1fr); } }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0 0 8px; }
        dt { color: var(--muted); }
        dd { margin: 0; overflow-wrap: break-word; }
        table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; font-size: 0.9rem; }
        caption { text-align: left; color: var(--muted); font-size: 0.85rem; padding-bottom: 2px; }
        th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid var(--rule); vertical-align: top; overflow-wrap: break-word; }
        th { font-weight: 600; white-space: nowrap; }
        td.number, th.number { text-align: right; }
        .meta, .totals { color: var(--muted); margin: 0 0 4px; overflow-wrap: anywhere; }
        .charts { display: flex; flex-wrap: wrap; gap: 12px; }
        .chart { margin: 0; min-width: 180px; }
        .chart figcaption { display: flex; justify-content: space-between; gap: 8px; font-size: 0.85rem; color: var(--muted); }
        .chart .latest { color: var(--ink); }
        .chart svg { display: block; max-width: 100%; height: auto; }
        .chart .line { stroke: var(--accent); stroke-width: 1.5; }
        details summary { cursor: pointer; color: var(--muted); font-size: 0.8rem; }
        .status.s2 { color: var(--ok); } .status.s4 { color: var(--warn); } .status.s5 { color: var(--bad); }
        svg.buckets { width: 100%; max-width: 520px; height: auto; }
        svg.buckets .axis { fill: var(--muted); font-size: 10px; }
        svg.buckets .tick { text-anchor: middle; }
        svg.buckets .label { fill: var(--page); font-size: 10px; font-weight: 600; }
        .bucket.v0 { fill: var(--v0); } .bucket.v1 { fill: var(--v1); } .bucket.v2 { fill: var(--v2); }
        .bucket.v3 { fill: var(--v3); } .bucket.v4 { fill: var(--v4); } .bucket.v5 { fill: var(--v5); }
        .bucket-list { margin: 4px 0; padding-left: 18px; font-size: 0.85rem; color: var(--muted); }
        button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: var(--card); cursor: pointer; }
        button#check { background: transparent; color: var(--accent); }
        button:disabled { opacity: 0.5; cursor: progress; }
        #auth { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; background: var(--card); border: 1px solid var(--bad); border-radius: 8px; padding: 8px 12px; margin-bottom: 12px; }
        #auth[hidden] { display: none; }
        input { font: inherit; padding: 5px 8px; border: 1px solid var(--rule); border-radius: 6px; background: var(--page); color: var(--ink); }
        .refused { color: var(--bad); }
        .reported { font-weight: 600; }
        .warnings { color: var(--warn); }
        """##
}
